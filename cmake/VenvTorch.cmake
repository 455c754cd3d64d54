# Finds LibTorch inside the project venv's PyPI torch wheel and exposes it as the
# interface target shardformer::torch (headers, flags, libraries, runtime search path).
set(SHARDFORMER_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python of the project venv (created by tools/setup.sh)")
if(NOT EXISTS "${SHARDFORMER_PYTHON}")
  message(FATAL_ERROR "No Python venv at ${SHARDFORMER_PYTHON}: run tools/setup.sh first")
endif()
execute_process(
  COMMAND "${SHARDFORMER_PYTHON}" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
  OUTPUT_VARIABLE SHARDFORMER_SITE_PACKAGES OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
# The venv may be a link into a cache folder (tools/setup.sh): use the real path, which also
# keeps the installed package free of paths inside the source tree.
file(REAL_PATH "${SHARDFORMER_SITE_PACKAGES}" SHARDFORMER_SITE_PACKAGES)
set(_torch_root "${SHARDFORMER_SITE_PACKAGES}/torch")
if(NOT EXISTS "${_torch_root}/share/cmake/Torch")
  message(FATAL_ERROR "torch is not installed in ${SHARDFORMER_SITE_PACKAGES}: run tools/setup.sh")
endif()

# The wheel is a CUDA build: its CMake package wants a CUDA toolkit at configure time. Name
# the architectures so it does not try to run a GPU probe on machines without a GPU. Without
# a toolkit, the headers and flags are taken from the wheel directly (CPU-only use).
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "8.0;9.0")
endif()
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(CMAKE_CUDA_COMPILER AND EXISTS "${CMAKE_CUDA_COMPILER}")
  list(APPEND CMAKE_PREFIX_PATH "${_torch_root}/share/cmake")
  find_package(Torch REQUIRED QUIET)
else()
  message(STATUS "No CUDA toolkit: using LibTorch headers without its CMake package")
  execute_process(
    COMMAND "${SHARDFORMER_PYTHON}" -c "import torch; print(torch.__version__.split('+')[0]); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    OUTPUT_VARIABLE _torch_facts OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  string(REPLACE "\n" ";" _torch_facts "${_torch_facts}")
  list(GET _torch_facts 0 Torch_VERSION)
  list(GET _torch_facts 1 _cxx11_abi)
  set(TORCH_INCLUDE_DIRS "${_torch_root}/include" "${_torch_root}/include/torch/csrc/api/include")
  set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=${_cxx11_abi}")
endif()

# Link only LibTorch itself. TORCH_LIBRARIES would add the system CUDA toolkit's libraries,
# whose versions differ from the CUDA libraries the wheel was built against (pip nvidia-*).
file(GLOB _nvidia_lib_dirs LIST_DIRECTORIES true "${SHARDFORMER_SITE_PACKAGES}/nvidia/*/lib")
# OpenBLAS from the same venv (scipy-openblas32: every symbol prefixed scipy_, so it cannot
# take the place of the sgemm_ that LibTorch exports, nor the reverse): the kernels' GEMM on
# AVX2-only CPUs (kernels/cpu/blas_gemm.cpp), which opens it at run time from the path below
# (linked, it started a spinning thread in every process before main()).
set(_openblas_root "${SHARDFORMER_SITE_PACKAGES}/scipy_openblas32")
if(NOT EXISTS "${_openblas_root}/lib/libscipy_openblas.so")
  message(FATAL_ERROR "scipy-openblas32 is not installed in ${SHARDFORMER_SITE_PACKAGES}: run tools/setup.sh")
endif()
add_library(shardformer_openblas INTERFACE)
target_include_directories(shardformer_openblas SYSTEM INTERFACE "${_openblas_root}/include")
target_compile_definitions(shardformer_openblas INTERFACE
  SHARDFORMER_OPENBLAS_LIBRARY="${_openblas_root}/lib/libscipy_openblas.so")
target_link_libraries(shardformer_openblas INTERFACE ${CMAKE_DL_LIBS})
set(SHARDFORMER_TORCH_RUNTIME_DIRS "${_torch_root}/lib" ${_nvidia_lib_dirs})
list(JOIN SHARDFORMER_TORCH_RUNTIME_DIRS ":" _rpath)

add_library(shardformer_torch INTERFACE)
add_library(shardformer::torch ALIAS shardformer_torch)
target_include_directories(shardformer_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_compile_options(shardformer_torch INTERFACE ${TORCH_CXX_FLAGS})
# Only the CPU libraries: libtorch.so would pull in libtorch_cuda and the CUDA libraries at
# every start. The SDK's CUDA module links those and is loaded when a job asks for a GPU
# (sdk/include/shardformer/runtime/cuda_support.h).
target_link_libraries(shardformer_torch INTERFACE
  "${_torch_root}/lib/libtorch_cpu.so" "${_torch_root}/lib/libc10.so")
# at::parallel_for is a header template: it runs on ATen's OpenMP threads only in code compiled
# with -fopenmp, and serially otherwise. Code that calls it (kernels/) compiles with
# SHARDFORMER_OPENMP_FLAGS and links the wheel's own libgomp, the runtime whose thread pool
# ATen sizes with at::set_num_threads (a second OpenMP runtime would oversubscribe the cores).
# Clang (the sanitizer build, tools/build.sh --sanitize) emits calls to LLVM's libomp, which
# also serves the GNU entry points that ATen's own code calls: a process loading it before the
# wheel's libgomp runs both on libomp's one pool.
set(SHARDFORMER_OPENMP_FLAGS "")
set(SHARDFORMER_OPENMP_LIBRARIES "")
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  set(SHARDFORMER_OPENMP_FLAGS -fopenmp)
  set(SHARDFORMER_OPENMP_LIBRARIES -fopenmp)
elseif(EXISTS "${_torch_root}/lib/libgomp.so.1")
  set(SHARDFORMER_OPENMP_FLAGS -fopenmp)
  set(SHARDFORMER_OPENMP_LIBRARIES "${_torch_root}/lib/libgomp.so.1")
endif()
set(SHARDFORMER_TORCH_CUDA_LIBRARIES "")
if(EXISTS "${_torch_root}/lib/libtorch_cuda.so")
  set(SHARDFORMER_TORCH_CUDA_LIBRARIES "${_torch_root}/lib/libtorch_cuda.so"
      "${_torch_root}/lib/libc10_cuda.so")
endif()
# libtorch_cuda.so has no RUNPATH of its own: a transitive RPATH (old dtags) lets the loader
# find the pip CUDA libraries without LD_LIBRARY_PATH.
target_link_options(shardformer_torch INTERFACE
  "LINKER:--disable-new-dtags" "LINKER:-rpath,${_rpath}" "LINKER:-rpath-link,${_rpath}")
# c10d's NCCL backend: its headers need the wheel's CUDA runtime and NCCL headers, and its code
# lives in libtorch_cuda. Present in the CUDA wheel; the SDK builds without it otherwise.
set(SHARDFORMER_NCCL_INCLUDE_DIRS "")
foreach(_dir nvidia/nccl/include nvidia/cu13/include nvidia/cuda_runtime/include)
  if(EXISTS "${SHARDFORMER_SITE_PACKAGES}/${_dir}")
    list(APPEND SHARDFORMER_NCCL_INCLUDE_DIRS "${SHARDFORMER_SITE_PACKAGES}/${_dir}")
  endif()
endforeach()
# Some wheels' CUDA headers lack the compiler's crt/ folder (torch 2.11+cu130): the toolkit's
# headers, searched after them, fill in.
if(SHARDFORMER_NCCL_INCLUDE_DIRS AND CUDAToolkit_INCLUDE_DIRS)
  list(APPEND SHARDFORMER_NCCL_INCLUDE_DIRS ${CUDAToolkit_INCLUDE_DIRS})
endif()
file(GLOB _libnccl "${SHARDFORMER_SITE_PACKAGES}/nvidia/nccl/lib/libnccl.so*")
if(EXISTS "${SHARDFORMER_SITE_PACKAGES}/nvidia/nccl/include/nccl.h" AND _libnccl
   AND EXISTS "${_torch_root}/lib/libtorch_cuda.so")
  list(GET _libnccl 0 _libnccl)
  set(SHARDFORMER_HAVE_NCCL ON)
  set(SHARDFORMER_NCCL_LIBRARIES "${_libnccl}")
  message(STATUS "c10d NCCL backend: enabled (${_libnccl})")
else()
  set(SHARDFORMER_HAVE_NCCL OFF)
  message(STATUS "c10d NCCL backend: disabled (no NCCL in the torch wheel)")
endif()
message(STATUS "LibTorch ${Torch_VERSION} from ${_torch_root}")
