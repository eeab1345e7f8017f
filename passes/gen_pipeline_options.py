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

so that pipeline options (passes/Passes.h) and shardc's flags derive from the
pass declarations instead of repeating them.
"""
import json
import sys


def cpp_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def one_line(text):
    return " ".join(text.split())


def is_list(option):
    return "ListOption" in option["!superclasses"]


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
