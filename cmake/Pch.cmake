# Precompiled LibTorch headers for every target that includes LibTorch (the SDK, host,
# plugins, tests, benchmarks): ATen and torch::nn dominate each translation unit's compile
# time. GCC accepts a precompiled header only with the same -fPIC / -fPIE setting, so
# libraries and executables have one each. shardformer_use_pch(TARGET) picks the right one.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(_shardformer_pch_headers <ATen/ATen.h> <torch/nn/module.h> <torch/autograd.h>
    <map> <memory> <string> <vector>)
foreach(_kind lib exe)
  add_library(shardformer_pch_${_kind} OBJECT "${CMAKE_CURRENT_LIST_DIR}/pch/pch.cpp")
  target_link_libraries(shardformer_pch_${_kind} PRIVATE shardformer_torch)
  target_compile_options(shardformer_pch_${_kind} PRIVATE -Wall -Wextra)
  target_precompile_headers(shardformer_pch_${_kind} PRIVATE ${_shardformer_pch_headers})
endforeach()
set_target_properties(shardformer_pch_exe PROPERTIES POSITION_INDEPENDENT_CODE OFF)
target_compile_options(shardformer_pch_exe PRIVATE -fPIE)

function(shardformer_use_pch target)
  if(NOT SHARDFORMER_PCH)
    return()
  endif()
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    target_precompile_headers(${target} REUSE_FROM shardformer_pch_exe)
  else()
    target_precompile_headers(${target} REUSE_FROM shardformer_pch_lib)
  endif()
endfunction()
