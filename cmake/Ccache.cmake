# Uses ccache when present, with the settings that let precompiled headers and fresh clones
# in other folders hit the cache.
find_program(SHARDFORMER_CCACHE ccache)
if(SHARDFORMER_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1
      ${SHARDFORMER_CCACHE})
  # ccache caches compiles that use the precompiled header only with this flag.
  add_compile_options(-fpch-preprocess)
  message(STATUS "ccache: ${SHARDFORMER_CCACHE}")
endif()
