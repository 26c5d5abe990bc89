# Debian package with CPack: `cpack -G DEB` in a build configured with -DCMAKE_INSTALL_PREFIX=/usr
# (docs/install.md). The package holds what `cmake --install` installs; its files sit under the
# prefix the build was configured with, as the programs and the systemd unit name it.
set(CPACK_PACKAGE_NAME perseus)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "GPU clock planning for energy-efficient pipeline-parallel training")
set(CPACK_PACKAGE_DESCRIPTION
    "Perseus removes energy bloat from large-model training with pipeline parallelism: it plans
the SM clock of every forward and backward computation so that GPUs off the critical path stop
racing ahead and waiting. This package holds the perseus command line, the perseusd control
plane, the perseus-gpud GPU clock daemon (with its systemd unit), libperseus with its headers,
pkg-config and CMake files, man pages and examples.")
set(PRS_PACKAGE_CONTACT "Perseus developers <perseus@localhost>"
    CACHE STRING "Maintainer field of the Debian package")
set(CPACK_PACKAGE_CONTACT "${PRS_PACKAGE_CONTACT}")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_RESOURCE_FILE_LICENSE "${CMAKE_SOURCE_DIR}/LICENSE")
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Debian 12's runtime packages of the libraries the programs and libperseus link.
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6 (>= 2.36), libmicrohttpd12, libjansson4, libsqlite3-0, libcurl4, libcminpack1")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "bash-completion")
# A shlibs file for libperseus.so.0 and the ldconfig trigger.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
include(CPack)
