# Debian packages with CPack: `cpack -G DEB` in a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr (docs/install.md). One package per install component
# (cmake/install.cmake), named as Debian names such packages:
#   perseus          the programs, their manual pages, completion, systemd unit, examples, docs
#   libperseus0      the shared library (its SONAME's major version in the name)
#   libperseus-dev   headers, libperseus.so and libperseus.a, pkg-config and CMake files
#   python3-perseus  the Python package (pure Python; it loads libperseus0)
# Each carries a machine-readable copyright file and a Debian changelog; binaries are stripped;
# the library's package registers with ldconfig through a trigger.
set(PRS_DEB_MAJOR ${PROJECT_VERSION_MAJOR})
set(PRS_DEB_LIB libperseus${PRS_DEB_MAJOR})
set(PRS_DEB_PACKAGES perseus ${PRS_DEB_LIB} libperseus-dev python3-perseus)

# The Maintainer field: -DPRS_PACKAGE_CONTACT="Name <address>", else DEBFULLNAME and DEBEMAIL from
# the environment (as Debian's packaging tools take them).
set(PRS_PACKAGE_CONTACT "" CACHE STRING "Maintainer field of the Debian packages")
# (A build configured before took a placeholder at localhost by default, which lintian refuses.)
if(PRS_PACKAGE_CONTACT MATCHES "@localhost>$")
  set(PRS_PACKAGE_CONTACT "" CACHE STRING "Maintainer field of the Debian packages" FORCE)
endif()
if(PRS_PACKAGE_CONTACT STREQUAL "")
  if(DEFINED ENV{DEBEMAIL} AND NOT "$ENV{DEBEMAIL}" STREQUAL "")
    set(PRS_DEB_NAME "$ENV{DEBFULLNAME}")
    if(PRS_DEB_NAME STREQUAL "")
      set(PRS_DEB_NAME "Perseus packager")
    endif()
    set(PRS_PACKAGE_CONTACT "${PRS_DEB_NAME} <$ENV{DEBEMAIL}>")
  else()
    set(PRS_PACKAGE_CONTACT "Perseus developers <perseus@example.org>")
  endif()
endif()
# The changelog's date: the version's, fixed, so two builds make the same package.
set(PRS_PACKAGE_DATE "Sat, 28 Nov 2026 00:00:00 +0000")

# Per package: /usr/share/doc/PACKAGE/copyright and changelog.gz (a native package's name).
configure_file(${CMAKE_SOURCE_DIR}/dist/debian/copyright.in ${CMAKE_BINARY_DIR}/debian/copyright
               @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/dist/debian/changelog.in ${CMAKE_BINARY_DIR}/debian/changelog
               @ONLY)
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/debian/changelog.gz
                   COMMAND ${PRS_GZIP} -9n -c ${CMAKE_BINARY_DIR}/debian/changelog >
                           ${CMAKE_BINARY_DIR}/debian/changelog.gz
                   DEPENDS ${CMAKE_BINARY_DIR}/debian/changelog VERBATIM)
add_custom_target(perseus_deb_changelog ALL DEPENDS ${CMAKE_BINARY_DIR}/debian/changelog.gz)
set(PRS_DEB_COMPONENTS tools lib dev python)
foreach(comp pkg IN ZIP_LISTS PRS_DEB_COMPONENTS PRS_DEB_PACKAGES)
  install(FILES ${CMAKE_BINARY_DIR}/debian/copyright ${CMAKE_BINARY_DIR}/debian/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${pkg} COMPONENT ${comp})
endforeach()

set(CPACK_PACKAGE_NAME perseus)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${PRS_PACKAGE_CONTACT}")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_RESOURCE_FILE_LICENSE "${CMAKE_SOURCE_DIR}/LICENSE")
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL ${PRS_DEB_COMPONENTS})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(PRS_DEB_VERSION_DEP "(= ${PROJECT_VERSION})")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME perseus)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION science)
# Debian 12's runtime packages of the libraries the programs link (statically for our own).
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS
    "libc6 (>= 2.36), libmicrohttpd12, libjansson4, libsqlite3-0, libcurl4, libcminpack1")
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS "bash-completion")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "python3-perseus, libperseus-dev")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
    "GPU clock planning for energy-efficient pipeline-parallel training
Perseus removes energy bloat from large-model training with pipeline
parallelism: it plans the SM clock of every forward and backward computation
so that GPUs off the critical path stop racing ahead and waiting.
.
This package holds the perseus command line, the perseusd control plane and
the perseus-gpud GPU clock daemon with its systemd unit, their manual pages,
examples and documentation.")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${PRS_DEB_LIB})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_DEPENDS "libc6 (>= 2.36), libjansson4, libcurl4, libcminpack1")
# The shlibs file for libperseus.so.MAJOR; ldconfig runs through a trigger, so the library's
# package has no maintainer scripts (the post-build script takes out those CPack writes).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/dist/debian/triggers)
set(CPACK_POST_BUILD_SCRIPTS ${CMAKE_SOURCE_DIR}/dist/debian/lib-no-scripts.cmake)
set(CPACK_DEBIAN_LIB_DESCRIPTION
    "Perseus energy planning library for pipeline-parallel training
Perseus plans the SM clock of every forward and backward computation of a
pipeline-parallel training iteration so that the iteration keeps its time at
the least energy.
.
This package holds the shared library libperseus: the planner, the emulator,
the GPU backends and the client that training processes link or load.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libperseus-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "${PRS_DEB_LIB} ${PRS_DEB_VERSION_DEP}, libcminpack-dev, libcurl4-openssl-dev | libcurl-dev, libjansson-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "Perseus energy planning library for pipeline-parallel training (development)
Perseus plans the SM clock of every forward and backward computation of a
pipeline-parallel training iteration so that the iteration keeps its time at
the least energy.
.
This package holds the headers, the static library, the link to the shared
library, and the pkg-config and CMake package files.")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-perseus)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3:any, ${PRS_DEB_LIB} ${PRS_DEB_VERSION_DEP}")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION
    "Perseus client for Python training loops
Perseus plans the SM clock of every forward and backward computation of a
pipeline-parallel training iteration so that the iteration keeps its time at
the least energy.
.
This package holds the Python binding of the Perseus client (ctypes, no
compiled code): hooks around each computation of a PyTorch training loop.")
include(CPack)
