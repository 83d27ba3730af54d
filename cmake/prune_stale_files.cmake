# cmake -DDIR=... -DKEEP="a;b" -DPATTERN=*.py -P prune_stale_files.cmake
# Removes the files matching PATTERN in DIR whose names are not in KEEP: the build tree's
# copy of the Python package keeps no module that the sources no longer have (a deleted
# source would otherwise stay importable from build/python and hide a broken import).
cmake_minimum_required(VERSION 3.16)
file(GLOB present RELATIVE ${DIR} ${DIR}/${PATTERN})
foreach(name IN LISTS present)
  if(NOT name IN_LIST KEEP)
    file(REMOVE ${DIR}/${name})
    get_filename_component(stem ${name} NAME_WE)
    file(GLOB cached ${DIR}/__pycache__/${stem}.*.pyc)
    if(cached)
      file(REMOVE ${cached})
    endif()
  endif()
endforeach()
