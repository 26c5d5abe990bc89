# cmake --install: programs, libperseus (shared and static), headers, pkg-config and CMake package
# files, man pages, bash completion, the systemd unit, examples and documentation (docs/install.md).
# Paths follow GNUInstallDirs; every file is placed relative to the prefix, so
# `cmake --install build --prefix DIR` puts a working tree anywhere.
include(CMakePackageConfigHelpers)

set(PRS_SYSTEMD_UNITDIR "lib/systemd/system"
    CACHE STRING "Where the systemd unit goes, relative to the prefix (or absolute)")
set(PRS_BASH_COMPLETIONDIR "${CMAKE_INSTALL_DATADIR}/bash-completion/completions"
    CACHE STRING "Where the bash completion goes, relative to the prefix (or absolute)")
set(PRS_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/Perseus")

install(TARGETS perseus perseusd perseus-gpud RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS perseus_shared perseus_static EXPORT PerseusTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# server.h (perseusd embedded) is not part of libperseus: the programs link it statically.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/perseus DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "server.h" EXCLUDE)

# CMake package: find_package(Perseus) -> Perseus::perseus (shared), Perseus::perseus_static.
install(EXPORT PerseusTargets NAMESPACE Perseus:: DESTINATION ${PRS_CMAKEDIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/PerseusConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/PerseusConfig.cmake
                              INSTALL_DESTINATION ${PRS_CMAKEDIR})
# 0.x: a new minor version may break the API, so only the same MAJOR.MINOR is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/PerseusConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/PerseusConfig.cmake ${CMAKE_BINARY_DIR}/PerseusConfigVersion.cmake
        DESTINATION ${PRS_CMAKEDIR})

# pkg-config: prefix found from the file's own place, so a tree installed with --prefix works.
file(RELATIVE_PATH PRS_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(PRS_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(PRS_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(PRS_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(PRS_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/perseus.pc.in ${CMAKE_BINARY_DIR}/perseus.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/perseus.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES ${CMAKE_SOURCE_DIR}/man/perseus.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_SOURCE_DIR}/man/perseusd.8 ${CMAKE_SOURCE_DIR}/man/perseus-gpud.8
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${CMAKE_SOURCE_DIR}/dist/bash-completion/perseus
        DESTINATION ${PRS_BASH_COMPLETIONDIR})

# The unit starts the installed perseus-gpud (the file in dist/ names /usr/local/bin).
file(READ ${CMAKE_SOURCE_DIR}/dist/systemd/perseus-gpud.service PRS_UNIT)
string(REPLACE "/usr/local/bin/perseus-gpud" "${CMAKE_INSTALL_FULL_BINDIR}/perseus-gpud" PRS_UNIT
               "${PRS_UNIT}")
string(REPLACE "/usr/share/doc/perseus/" "${CMAKE_INSTALL_FULL_DOCDIR}/" PRS_UNIT "${PRS_UNIT}")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/dist/perseus-gpud.service CONTENT "${PRS_UNIT}")
install(FILES ${CMAKE_BINARY_DIR}/dist/perseus-gpud.service DESTINATION ${PRS_SYSTEMD_UNITDIR})

# The Python package (python/perseus: pure Python, no build step) where Debian's python3 looks for
# system packages: with the prefix /usr (the Debian package), `import perseus` works as it is;
# with another prefix, PYTHONPATH=PREFIX/lib/python3/dist-packages (docs/install.md).
set(PRS_PYTHON_DIR "lib/python3/dist-packages"
    CACHE STRING "Where the Python package goes, relative to the prefix (or absolute)")
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/perseus DESTINATION ${PRS_PYTHON_DIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "py.typed" PATTERN "__pycache__" EXCLUDE)
install(FILES ${CMAKE_SOURCE_DIR}/examples/README.md ${CMAKE_SOURCE_DIR}/examples/a100-8stage.csv
              ${CMAKE_SOURCE_DIR}/dist/gpud.conf.example
              ${CMAKE_SOURCE_DIR}/python/examples/pipeline_gloo.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/perseus/examples)
file(GLOB PRS_DOCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${PRS_DOCS} ${CMAKE_SOURCE_DIR}/docs/grafana-dashboard.json
              ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/CHANGELOG.md
              ${CMAKE_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/img DESTINATION ${CMAKE_INSTALL_DOCDIR})
