"""Generates the pipeline options of Shard's passes from passes/Passes.td.

    gen_pipeline_options.py PASSES.json OUT.h.inc

PASSES.json is `llvm-tblgen --dump-json` of Passes.td. Each pass option is
declared once, in Passes.td. For every pass with options this writes:

  SHARDC_PIPELINE_OPTIONS_<Pass>   the options as members of a
                                   mlir::PassPipelineOptions struct (same
                                   argument, type, default, description and
                                   cl flags as the pass's own option; a
                                   ListOption becomes a RepeatedOption,
                                   passes/Passes.h)
  get<Pass>Options(pipeline)       the pass's generated <Pass>Options struct
                                   filled from a pipeline's options
  k<Pass>OptionArgs                the options' command-line arguments
  SHARDC_CHECK_OPTIONS_<Pass>      for a pass with BoundedOptions: its
                                   checkOptions() member, which checks the
                                   pass's own option values against their
                                   declared ranges (passes/OptionRange.h)

A BoundedOption's range ("[0, inf)", "(0, 1048576]") becomes an OptionRange:
its pipeline option is a BoundedOption that refuses a value outside the range
as it parses it, and the pass's checkOptions() refuses one given to the pass
directly.

so that pipeline options (passes/Passes.h) and shardc's flags derive from the
pass declarations instead of repeating them.
"""
import json
import re
import sys


def cpp_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def one_line(text):
    return " ".join(text.split())


def is_list(option):
    return "ListOption" in option["!superclasses"]


def is_bounded(option):
    return "BoundedOption" in option["!superclasses"]


def cpp_bound(value, cpp_type, sign):
    """A bound of a range as a C++ expression of the option's type."""
    if value in ("inf", "-inf"):
        limit = "infinity()" if "double" in cpp_type or "float" in cpp_type else (
            "max()" if sign > 0 else "lowest()")
        expr = "::std::numeric_limits<%s>::%s" % (cpp_type, limit)
        return ("-" + expr) if value == "-inf" and "infinity" in limit else expr
    float(value)  # a number, or the declaration is wrong
    return "%s(%s)" % (cpp_type, value)


def option_range(option):
    """The OptionRange expression of a BoundedOption."""
    text = option["range"]
    m = re.fullmatch(r"\s*([\[(])\s*([^,\s]+)\s*,\s*([^,\s\])]+)\s*([\])])\s*", text)
    if not m:
        sys.exit("Passes.td: option %s: range %r is not an interval like '[0, inf)'"
                 % (option["argument"], text))
    lo_bracket, lo, hi, hi_bracket = m.groups()
    cpp_type = option["type"]
    is_float = "double" in cpp_type or "float" in cpp_type
    if lo == "-inf" and hi == "inf":
        words = "finite" if is_float else "an integer"
    elif hi == "inf":
        words = ("finite and " if is_float else "") + (">= " if lo_bracket == "[" else "> ") + lo
    else:
        words = "in %s%s, %s%s" % (lo_bracket, lo, hi, hi_bracket)
    # An infinite end is open for floating-point options (values are finite)
    # and closed at the type's limit for integers.
    lo_open = lo_bracket == "(" and not (lo == "-inf" and not is_float)
    hi_open = hi_bracket == ")" and not (hi == "inf" and not is_float)
    return "::shardc::OptionRange<%s>{%s, %s, %s, %s, %s}" % (
        cpp_type, cpp_bound(lo, cpp_type, -1), cpp_bound(hi, cpp_type, 1),
        "true" if lo_open else "false", "true" if hi_open else "false", cpp_string(words))


def main(json_path, out_path):
    with open(json_path) as f:
        records = json.load(f)
    passes = sorted(records["!instanceof"]["PassBase"],
                    key=lambda name: records[name]["!locs"][0])
    out = ["// Generated from passes/Passes.td by passes/gen_pipeline_options.py.",
           "// Do not edit: change the pass's options in Passes.td.", ""]
    for name in passes:
        options = [records[o["def"]] for o in records[name]["options"]]
        if not options:
            continue
        argument = records[name]["argument"]
        members = []
        for o in options:
            parts = ["*this", cpp_string(o["argument"]),
                     "::llvm::cl::desc(" + cpp_string(o["description"]) + ")"]
            if o["defaultValue"]:
                parts.append("::llvm::cl::init(" + one_line(o["defaultValue"]) + ")")
            if o["additionalOptFlags"].strip():
                parts.append(one_line(o["additionalOptFlags"]))
            kind = "RepeatedOption" if is_list(o) else "Option"
            if is_bounded(o):
                kind = "BoundedOption"
                parts.insert(0, option_range(o))
            members.append("  %s<%s> %s{%s};" % (kind, o["type"], o["cppName"], ", ".join(parts)))
        out.append("/// The options of %s (%s), as pipeline option members." % (name, argument))
        out.append("#define SHARDC_PIPELINE_OPTIONS_%s \\" % name)
        out.append(" \\\n".join(members))
        out.append("")
        out.append("/// %s's options as set in a pipeline's options." % name)
        out.append("template <typename PipelineOptionsT>")
        out.append("%sOptions get%sOptions(const PipelineOptionsT &pipeline) {" % (name, name))
        out.append("  %sOptions options;" % name)
        for o in options:
            if is_list(o):
                out.append("  options.{0} = ::llvm::ArrayRef<{1}>(pipeline.{0});".format(o["cppName"], o["type"]))
            else:
                out.append("  options.%s = pipeline.%s.getValue();" % (o["cppName"], o["cppName"]))
        out.append("  return options;")
        out.append("}")
        out.append("")
        out.append("/// The command-line arguments of %s's options." % name)
        out.append("inline constexpr const char *k%sOptionArgs[] = {%s};" % (
            name, ", ".join(cpp_string(o["argument"]) for o in options)))
        out.append("")
        bounded = [o for o in options if is_bounded(o)]
        if bounded:
            out.append("/// %s's checkOptions(), a member of the pass: the first of its options" % name)
            out.append("/// outside the range Passes.td declares for it, or none. Written")
            out.append("/// `SHARDC_CHECK_OPTIONS_%s;` in the pass's class." % name)
            lines = ["  ::std::optional<::std::string> checkOptions() const {"]
            for o in bounded:
                lines.append("    if (auto err = ::shardc::checkOptionRange<%s>(%s, %s, %s(%s), %s))" % (
                    o["type"], cpp_string(o["argument"]), o["cppName"], o["type"],
                    one_line(o["defaultValue"]), option_range(o)))
                lines.append("      return err;")
            lines.append("    return ::std::nullopt;")
            lines.append("  }")
            out.append("#define SHARDC_CHECK_OPTIONS_%s \\" % name)
            out.append(" \\\n".join(lines))
            out.append("")
    text = "\n".join(out)
    try:
        with open(out_path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    with open(out_path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
