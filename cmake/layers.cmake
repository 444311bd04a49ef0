# sp_layer(NAME DEPS ...): one static library per src/ folder, built from every .cc in it.
# DEPS may only name layers below this one (docs/architecture.md §Layers); that is the layering rule.
function(sp_layer name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc ${CMAKE_CURRENT_SOURCE_DIR}/*/*.cc)
  if(srcs)
    add_library(sp_${name} STATIC ${srcs})
    target_link_libraries(sp_${name} PUBLIC ${ARG_DEPS})
  else()
    add_library(sp_${name} INTERFACE)
    target_link_libraries(sp_${name} INTERFACE ${ARG_DEPS})
  endif()
endfunction()
