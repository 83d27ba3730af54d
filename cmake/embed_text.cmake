# cmake -DINPUT=file -DOUTPUT=file.cc -DNAME=kName -P embed_text.cmake
# Writes a C++ file defining `extern const char spawnpool::detail::NAME[]` with the text of
# INPUT, so that a resource (the build report's page) is part of the library and needs no
# install path. The raw-string delimiter (at most 16 characters) may not occur in the text; the file is checked.
file(READ "${INPUT}" text)
set(delimiter "spawnpool_text")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter ${delimiter}")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/embed_text.cmake; do not edit.\n"
  "namespace spawnpool::detail {\n"
  "extern const char ${NAME}[];\n"
  "const char ${NAME}[] = R\"${delimiter}(${text})${delimiter}\";\n"
  "}  // namespace spawnpool::detail\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
