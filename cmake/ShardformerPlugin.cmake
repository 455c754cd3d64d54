# shardformer_add_plugin(NAME SOURCES...): builds a model-family plugin as a shared library
# (hidden visibility, linked to the SDK only), for in-tree and out-of-tree plugins alike.
function(shardformer_add_plugin name)
  add_library(${name} MODULE ${ARGN})
  if(TARGET shardformer::sdk)
    target_link_libraries(${name} PRIVATE shardformer::sdk)
  else()
    target_link_libraries(${name} PRIVATE shardformer_sdk)
  endif()
  set_target_properties(${name} PROPERTIES
    PREFIX "libshardformer_"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(COMMAND shardformer_use_pch)  # in-tree builds share the project's precompiled header
    target_compile_options(${name} PRIVATE -Wall -Wextra)
    shardformer_use_pch(${name})
    # One precompiled-header load per plugin rather than per source (cmake/Unity.cmake).
    shardformer_unity_build(${name})
    set_property(GLOBAL APPEND PROPERTY SHARDFORMER_IN_TREE_PLUGINS ${name})
  endif()
  if(SHARDFORMER_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${SHARDFORMER_PLUGIN_OUTPUT_DIR})
  endif()
endfunction()
