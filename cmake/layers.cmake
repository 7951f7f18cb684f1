# Layers that cannot be reached around (docs/architecture.md). No library declares src/ as an include directory:
# each one's include root is a directory of symbolic links to the folders it owns,
#   build/roots/<target>/<folder> -> src/<folder>
# and a library sees its own root and the roots of the libraries it links, nothing else. So a header is included as
# "service/service.h" everywhere, and the store including it does not compile: the build refuses a layer reaching
# upward (or sideways) instead of a reviewer having to notice.
function(rk_own_folders target)
  set(root ${CMAKE_BINARY_DIR}/roots/${target})
  foreach(folder ${ARGN})
    get_filename_component(parent ${root}/${folder} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    if(NOT IS_SYMLINK ${root}/${folder})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${folder} ${root}/${folder} SYMBOLIC)
    endif()
  endforeach()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${root}>)
  else()
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
  endif()
endfunction()
