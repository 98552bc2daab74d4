# BpfObject.cmake - compile BPF C into one linked object and one skeleton.
#
#   steptrace_bpf_skeleton(NAME <name> SOURCES <a.bpf.c>... INCLUDES <dir>...)
#
# Each .bpf.c becomes its own .bpf.o (clang -target bpf, with a depfile so an
# edited header rebuilds only the objects that include it), `bpftool gen
# object` links them into <name>.bpf.o, and `bpftool gen skeleton` writes
# <name>.skel.h. The result is an INTERFACE target <name>_skel that brings the
# skeleton's include dir and libbpf. One custom target per generated file so
# two consumers never race in a parallel build.

find_program(BPF_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)

execute_process(COMMAND ${BPF_CLANG} --version OUTPUT_VARIABLE _clang_ver)
string(REGEX MATCH "version ([0-9]+)" _m "${_clang_ver}")
if(CMAKE_MATCH_1 AND CMAKE_MATCH_1 LESS 12)
  message(FATAL_ERROR "clang >= 12 is needed for BPF CO-RE, found ${CMAKE_MATCH_1}")
endif()

# x86_64 only until a vmlinux/arm64 exists: the one committed vmlinux.h is
# vmlinux/x86, and the syscall numbers and argument registers the BPF programs
# and the analysis use are x86_64's (bpf/arch_x86.h). Another arch needs its
# own vmlinux/<arch>/vmlinux.h and an arch header beside arch_x86.h.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|amd64")
  set(BPF_TARGET_ARCH x86)
else()
  message(FATAL_ERROR "unsupported arch ${CMAKE_SYSTEM_PROCESSOR}: steptrace builds for x86_64 only")
endif()

# clang -target bpf does not see the host's arch-specific system headers;
# borrow the host compiler's include path the way libbpf-bootstrap does.
execute_process(COMMAND ${BPF_CLANG} -v -E - INPUT_FILE /dev/null
                ERROR_VARIABLE _clang_v OUTPUT_QUIET)
string(REGEX MATCH "#include <...> search starts here:\n(.*)End of search list" _m "${_clang_v}")
string(REGEX REPLACE "\n +" ";" _sys_dirs "${CMAKE_MATCH_1}")
set(BPF_SYSTEM_INCLUDES "")
foreach(d ${_sys_dirs})
  string(STRIP "${d}" d)
  if(d)
    list(APPEND BPF_SYSTEM_INCLUDES "-idirafter" "${d}")
  endif()
endforeach()

function(steptrace_bpf_skeleton)
  cmake_parse_arguments(A "" "NAME" "SOURCES;INCLUDES" ${ARGN})
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/bpf)
  file(MAKE_DIRECTORY ${out_dir})
  set(inc_flags "")
  foreach(i ${A_INCLUDES})
    list(APPEND inc_flags "-I${i}")
  endforeach()
  set(objs "")
  foreach(src ${A_SOURCES})
    get_filename_component(base ${src} NAME_WE)
    set(obj ${out_dir}/${base}.bpf.o)
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${BPF_TARGET_ARCH}
              -Wall -Werror ${inc_flags} ${BPF_SYSTEM_INCLUDES}
              -MD -MF ${obj}.d -c ${src} -o ${obj}
      DEPFILE ${obj}.d
      DEPENDS ${src}
      COMMENT "BPF ${base}.bpf.c"
      VERBATIM)
    list(APPEND objs ${obj})
  endforeach()
  set(linked ${out_dir}/${A_NAME}.bpf.o)
  set(skel ${out_dir}/${A_NAME}.skel.h)
  add_custom_command(
    OUTPUT ${linked}
    COMMAND ${BPFTOOL} gen object ${linked} ${objs}
    DEPENDS ${objs}
    COMMENT "BPF link ${A_NAME}.bpf.o"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${BPFTOOL} gen skeleton ${linked} name ${A_NAME} > ${skel}
    DEPENDS ${linked}
    COMMENT "BPF skeleton ${A_NAME}.skel.h"
    VERBATIM)
  add_custom_target(${A_NAME}_skel_gen DEPENDS ${skel})
  add_library(${A_NAME}_skel INTERFACE)
  add_dependencies(${A_NAME}_skel ${A_NAME}_skel_gen)
  target_include_directories(${A_NAME}_skel INTERFACE ${out_dir})
  target_link_libraries(${A_NAME}_skel INTERFACE PkgConfig::LIBBPF)
endfunction()
