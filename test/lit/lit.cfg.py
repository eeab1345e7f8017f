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
