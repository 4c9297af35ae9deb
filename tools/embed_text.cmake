# Embeds a text file in the library as a C array: the one way device code (every .cu and .cuh
# of src/backend/cuda) gets into libtgc. CMakeLists.txt runs it for each file at build time:
#   cmake -DIN=<file> -DOUT=<header> -DNAME=<identifier> -P tools/embed_text.cmake
# OUT holds `static const char NAME[]`: the file's bytes and a terminating NUL (sizeof NAME is
# the file's length + 1). The bytes are written as numbers, so no character of the text needs
# escaping and no compiler limit on string literals applies.
if(NOT IN OR NOT OUT OR NOT NAME)
  message(FATAL_ERROR "embed_text.cmake: IN, OUT and NAME are required")
endif()
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# 16 bytes a line (CMake's regular expressions have no {n})
string(REPEAT "0x[0-9a-f][0-9a-f]," 16 line)
string(REGEX REPLACE "(${line})" "\\1\n    " bytes "${bytes}")
get_filename_component(src "${IN}" NAME)
set(text "/* Generated at build time from ${src} by tools/embed_text.cmake: do not edit. */\n")
string(APPEND text "static const char ${NAME}[] = {\n    ${bytes}0x00};\n")
file(WRITE "${OUT}" "${text}")
