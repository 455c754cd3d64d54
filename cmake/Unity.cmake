# CMake's unity build for the targets with several sources that each load LibTorch's
# precompiled header (the SDK, the host's core, the plugins, multi-source test executables): one
# header load per batch of 8 sources. A batch is one file, so its sources' anonymous namespaces
# share one scope: the test unity_names (tools/check_unity_names.py) refuses a name with internal
# linkage in two sources of a target.
option(SHARDFORMER_UNITY_BUILD "Compile the SDK, host, plugins and tests in batches of sources" ON)
function(shardformer_unity_build target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ${SHARDFORMER_UNITY_BUILD}
                                             UNITY_BUILD_BATCH_SIZE 8)
  # GCC takes a source included by a batch for a header, and warns of every class that derives
  # from or holds a type of that source's anonymous namespace (a test fixture, say). Within one
  # translation unit that is no fault.
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
  get_target_property(_sources ${target} SOURCES)
  get_target_property(_dir ${target} SOURCE_DIR)
  set(_paths "")
  foreach(_source IN LISTS _sources)
    if(_source MATCHES "\\.(cpp|cc|cxx)$")
      cmake_path(ABSOLUTE_PATH _source BASE_DIRECTORY "${_dir}")
      list(APPEND _paths "${_source}")
    endif()
  endforeach()
  list(JOIN _paths "\n" _text)
  set(_list "${PROJECT_BINARY_DIR}/unity_sources/${target}.txt")
  file(WRITE "${_list}" "${_text}\n")
  set_property(GLOBAL APPEND PROPERTY SHARDFORMER_UNITY_SOURCE_LISTS "${_list}")
endfunction()
