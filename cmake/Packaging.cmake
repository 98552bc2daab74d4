# Install rules for the daemon's files and the CPack .deb:
#   cmake --build build && (cd build && cpack -G DEB)   ->  build/steptrace_<ver>_<arch>.deb
include(GNUInstallDirs)

set(_pkg ${CMAKE_SOURCE_DIR}/packaging)
install(FILES ${_pkg}/systemd/steptrace.service DESTINATION lib/systemd/system)
install(FILES ${_pkg}/steptrace.toml DESTINATION /etc/steptrace)
# The man page's version comes from project(VERSION), its one home.
configure_file(${_pkg}/steptrace.8.in ${CMAKE_BINARY_DIR}/steptrace.8 @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/steptrace.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${_pkg}/grafana/steptrace-dashboard.json ${_pkg}/prometheus/steptrace-alerts.yml
        ${_pkg}/prometheus/steptrace-rules.yml DESTINATION ${CMAKE_INSTALL_DATADIR}/steptrace)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME steptrace)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "steptrace maintainers <steptrace@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "eBPF tracer that explains why each ML training step is slow")
set(CPACK_PACKAGE_DESCRIPTION "steptrace traces training jobs from the kernel (scheduler, block I/O, TCP, Neuron
 driver ioctls, runtime uprobes), splits each step's time into categories, names what gates the
 accelerator, and runs as a daemon exporting Prometheus metrics.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Maintainer scripts (packaging/deb/): daemon-reload when systemd runs; the unit is
# never enabled or started by the package (`systemctl enable --now steptrace`).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/deb/conffiles ${_pkg}/deb/postinst ${_pkg}/deb/prerm
    ${_pkg}/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
# Only the product, not the test tools (trainsim, accuracy) if they ever grow install rules.
set(CPACK_DEB_COMPONENT_INSTALL OFF)
file(WRITE ${CMAKE_BINARY_DIR}/deb/conffiles "/etc/steptrace/steptrace.toml\n")
include(CPack)
