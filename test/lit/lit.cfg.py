# lit configuration of Shard's FileCheck tests.
import os
import lit.formats

config.name = "Shard"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.shard_obj_root, "test", "lit")

path = os.pathsep.join([config.shard_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ.get("PATH", ""))])
config.environment["PATH"] = path
config.substitutions.append(("%python", config.python_executable))

# cuda-backend: the CUDA plugin was built (cmake/ShardCuda.cmake). gpu: this
# machine has an NVIDIA GPU that nvidia-smi lists.
import shutil
import subprocess
if getattr(config, "shard_cuda_enabled", False):
    config.available_features.add("cuda-backend")
# %cuda-build: "built" or "unbuilt", to pick the check prefix a test expects.
config.substitutions.append(
    ("%cuda-build",
     "built" if getattr(config, "shard_cuda_enabled", False) else "unbuilt"))
if shutil.which("nvidia-smi"):
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                text=True, timeout=30)
        if listed.returncode == 0 and "GPU" in listed.stdout:
            config.available_features.add("gpu")
    except (OSError, subprocess.SubprocessError):
        pass

# Open MPI makes its session directory, BASE/ompi.HOST.UID, when an mpirun
# starts, with BASE the temporary directory; two mpiruns starting at once
# where it does not exist yet race on that mkdir, and one fails ("A call to
# mkdir was unable to create the desired directory ... File exists"). lit
# gives each run a fresh temporary directory and runs tests in parallel, so
# the tests' mpiruns get a base of their own whose session directories
# always exist: each holds a directory of its own, so that an mpirun leaving
# (which removes its job's directory, the files beside it, and the shared
# one when that is empty) never removes the shared one.
import socket
import tempfile
ompi_base = os.path.join(tempfile.gettempdir(), "shard-lit-ompi-%d" % os.getuid())
host = socket.gethostname()
for name in {host, host.split(".")[0]}:
    session = os.path.join(ompi_base, "ompi.%s.%d" % (name, os.getuid()))
    os.makedirs(os.path.join(session, "kept-by-shard-lit"), exist_ok=True)
config.environment["OMPI_MCA_orte_tmpdir_base"] = ompi_base
