# Precompiled LibTorch headers for every target that includes LibTorch (the SDK, host,
# plugins, tests, benchmarks): ATen and torch::nn dominate each translation unit's compile
# time. GCC accepts a precompiled header only with the same -fPIC / -fPIE setting, so
# libraries and executables have one each; Clang (the sanitizer build) also wants the same
# default visibility, so plugins (hidden) get a third there. shardformer_use_pch(TARGET) picks.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(_shardformer_pch_headers <ATen/ATen.h> <torch/nn/module.h> <torch/autograd.h>
    <map> <memory> <string> <vector>)
set(_shardformer_pch_kinds lib exe)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  list(APPEND _shardformer_pch_kinds plugin)
endif()
foreach(_kind IN LISTS _shardformer_pch_kinds)
  add_library(shardformer_pch_${_kind} OBJECT "${CMAKE_CURRENT_LIST_DIR}/pch/pch.cpp")
  target_link_libraries(shardformer_pch_${_kind} PRIVATE shardformer_torch)
  target_compile_options(shardformer_pch_${_kind} PRIVATE -Wall -Wextra)
  target_precompile_headers(shardformer_pch_${_kind} PRIVATE ${_shardformer_pch_headers})
endforeach()
set_target_properties(shardformer_pch_exe PROPERTIES POSITION_INDEPENDENT_CODE OFF)
target_compile_options(shardformer_pch_exe PRIVATE -fPIE)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  set_target_properties(shardformer_pch_plugin PROPERTIES CXX_VISIBILITY_PRESET hidden
                                                          VISIBILITY_INLINES_HIDDEN ON)
  # Clang stamps a header's build time into it unless told not to, and ccache then misses
  # every source that includes a header rebuilt in a fresh clone.
  foreach(_kind IN LISTS _shardformer_pch_kinds)
    target_compile_options(shardformer_pch_${_kind} PRIVATE "SHELL:-Xclang -fno-pch-timestamp")
  endforeach()
endif()

function(shardformer_use_pch target)
  if(NOT SHARDFORMER_PCH)
    return()
  endif()
  get_target_property(_type ${target} TYPE)
  get_target_property(_visibility ${target} CXX_VISIBILITY_PRESET)
  if(_type STREQUAL "EXECUTABLE")
    target_precompile_headers(${target} REUSE_FROM shardformer_pch_exe)
  elseif(_visibility STREQUAL "hidden" AND TARGET shardformer_pch_plugin)
    target_precompile_headers(${target} REUSE_FROM shardformer_pch_plugin)
  else()
    target_precompile_headers(${target} REUSE_FROM shardformer_pch_lib)
  endif()
endfunction()
