# -DSTEPTRACE_STATIC=ON: one steptrace binary that can be copied onto a node.
# libbpf, libelf and zlib (and libstdc++/libgcc) are linked statically from the
# Debian -dev packages' .a files. glibc stays dynamic (NSS, and glibc's static
# getaddrinfo is not reliable), so the file runs on any glibc >= the builder's.
# Debian ships cpp-httplib only as a shared library (built with OpenSSL): with
# STEPTRACE_HTTPLIB_HEADER pointing at upstream's single-file httplib.h it is
# compiled in as well; otherwise libcpp-httplib.so remains a runtime dependency.
option(STEPTRACE_STATIC "Link libbpf, libelf, zlib and libstdc++ statically into steptrace" OFF)
set(STEPTRACE_HTTPLIB_HEADER "" CACHE FILEPATH "Upstream single-header httplib.h for a self-contained static build")

if(STEPTRACE_STATIC)
  find_library(_bpf_a NAMES libbpf.a REQUIRED)
  find_library(_elf_a NAMES libelf.a REQUIRED)
  find_library(_z_a NAMES libz.a REQUIRED)
  find_library(_zstd_a NAMES libzstd.a)
  set(_static_libs ${_bpf_a} ${_elf_a} ${_z_a})
  if(_zstd_a)
    list(APPEND _static_libs ${_zstd_a})
  endif()
  # Replace the shared libbpf/zlib the core library would pull in.
  set_property(TARGET PkgConfig::LIBBPF PROPERTY INTERFACE_LINK_LIBRARIES ${_static_libs})
  set_property(TARGET PkgConfig::LIBBPF PROPERTY INTERFACE_LINK_DIRECTORIES "")
  set_property(TARGET ZLIB::ZLIB PROPERTY IMPORTED_LOCATION ${_z_a})
  target_link_options(steptrace PRIVATE -static-libstdc++ -static-libgcc)
  if(STEPTRACE_HTTPLIB_HEADER)
    get_filename_component(_hdir ${STEPTRACE_HTTPLIB_HEADER} DIRECTORY)
    set_property(TARGET PkgConfig::HTTPLIB PROPERTY INTERFACE_LINK_LIBRARIES pthread)
    set_property(TARGET PkgConfig::HTTPLIB PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${_hdir})
    set_property(TARGET PkgConfig::HTTPLIB PROPERTY INTERFACE_COMPILE_OPTIONS "")
    set_property(TARGET PkgConfig::HTTPLIB PROPERTY INTERFACE_LINK_DIRECTORIES "")
  endif()
  message(STATUS "steptrace: static libbpf/libelf/zlib: ${_static_libs}")
endif()
