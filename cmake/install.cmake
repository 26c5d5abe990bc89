# cmake --install: programs, libperseus (shared and static), headers, pkg-config and CMake package
# files, man pages, bash completion, the systemd unit, examples and documentation (docs/install.md).
# Paths follow GNUInstallDirs; every file is placed relative to the prefix, so
# `cmake --install build --prefix DIR` puts a working tree anywhere. Each file belongs to one
# component, one Debian package each (cmake/package.cmake): tools (the programs and what goes
# with them: package perseus), lib (libperseus.so.0: libperseus0), dev (headers, the link-time
# library, pkg-config and CMake files: libperseus-dev) and python (python3-perseus).
include(CMakePackageConfigHelpers)

set(PRS_SYSTEMD_UNITDIR "lib/systemd/system"
    CACHE STRING "Where the systemd unit goes, relative to the prefix (or absolute)")
set(PRS_BASH_COMPLETIONDIR "${CMAKE_INSTALL_DATADIR}/bash-completion/completions"
    CACHE STRING "Where the bash completion goes, relative to the prefix (or absolute)")
set(PRS_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/Perseus")

install(TARGETS perseus perseusd perseus-gpud perseus-router perseus-instclock perseus-fakeserve
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        COMPONENT tools)
install(TARGETS perseus_shared perseus_static EXPORT PerseusTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# server.h (perseusd embedded) is not part of libperseus: the programs link it statically.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/perseus DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.h" PATTERN "server.h" EXCLUDE)

# CMake package: find_package(Perseus) -> Perseus::perseus (shared), Perseus::perseus_static.
install(EXPORT PerseusTargets NAMESPACE Perseus:: DESTINATION ${PRS_CMAKEDIR} COMPONENT dev)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/PerseusConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/PerseusConfig.cmake
                              INSTALL_DESTINATION ${PRS_CMAKEDIR})
# 0.x: a new minor version may break the API, so only the same MAJOR.MINOR is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/PerseusConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/PerseusConfig.cmake ${CMAKE_BINARY_DIR}/PerseusConfigVersion.cmake
        DESTINATION ${PRS_CMAKEDIR} COMPONENT dev)

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
install(FILES ${CMAKE_BINARY_DIR}/perseus.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)

# Manual pages compressed (gzip -9n: no name or time stamp, so the same bytes every build), as
# man(1) reads them and Debian's policy wants them.
find_program(PRS_GZIP gzip REQUIRED)
foreach(page perseus.1 perseusd.8 perseus-gpud.8 perseus-router.8 perseus-instclock.8
             perseus-fakeserve.1)
  string(REGEX REPLACE ".*\\.([0-9])$" "\\1" section ${page})
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/man/${page}.gz
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
                     COMMAND ${PRS_GZIP} -9n -c ${CMAKE_SOURCE_DIR}/man/${page} >
                             ${CMAKE_BINARY_DIR}/man/${page}.gz
                     DEPENDS ${CMAKE_SOURCE_DIR}/man/${page} VERBATIM)
  list(APPEND PRS_MAN_GZ ${CMAKE_BINARY_DIR}/man/${page}.gz)
  install(FILES ${CMAKE_BINARY_DIR}/man/${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
          COMPONENT tools)
endforeach()
add_custom_target(perseus_man ALL DEPENDS ${PRS_MAN_GZ})
install(FILES ${CMAKE_SOURCE_DIR}/dist/bash-completion/perseus
        DESTINATION ${PRS_BASH_COMPLETIONDIR} COMPONENT tools)

# The unit starts the installed perseus-gpud (the file in dist/ names /usr/local/bin).
file(READ ${CMAKE_SOURCE_DIR}/dist/systemd/perseus-gpud.service PRS_UNIT)
string(REPLACE "/usr/local/bin/perseus-gpud" "${CMAKE_INSTALL_FULL_BINDIR}/perseus-gpud" PRS_UNIT
               "${PRS_UNIT}")
string(REPLACE "/usr/share/doc/perseus/" "${CMAKE_INSTALL_FULL_DOCDIR}/" PRS_UNIT "${PRS_UNIT}")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/dist/perseus-gpud.service CONTENT "${PRS_UNIT}")
install(FILES ${CMAKE_BINARY_DIR}/dist/perseus-gpud.service DESTINATION ${PRS_SYSTEMD_UNITDIR}
        COMPONENT tools)
# perseusd's unit, with the installed program and documentation likewise.
file(READ ${CMAKE_SOURCE_DIR}/dist/systemd/perseusd.service PRS_UNIT)
string(REPLACE "/usr/local/bin/perseusd" "${CMAKE_INSTALL_FULL_BINDIR}/perseusd" PRS_UNIT
               "${PRS_UNIT}")
string(REPLACE "/usr/share/doc/perseus/" "${CMAKE_INSTALL_FULL_DOCDIR}/" PRS_UNIT "${PRS_UNIT}")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/dist/perseusd.service CONTENT "${PRS_UNIT}")
install(FILES ${CMAKE_BINARY_DIR}/dist/perseusd.service DESTINATION ${PRS_SYSTEMD_UNITDIR}
        COMPONENT tools)

# The Python package (python/perseus: pure Python, no build step) where Debian's python3 looks for
# system packages: with the prefix /usr (the Debian package), `import perseus` works as it is;
# with another prefix, PYTHONPATH=PREFIX/lib/python3/dist-packages (docs/install.md).
set(PRS_PYTHON_DIR "lib/python3/dist-packages"
    CACHE STRING "Where the Python package goes, relative to the prefix (or absolute)")
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/perseus DESTINATION ${PRS_PYTHON_DIR} COMPONENT python
        FILES_MATCHING PATTERN "*.py" PATTERN "py.typed" PATTERN "__pycache__" EXCLUDE)
install(FILES ${CMAKE_SOURCE_DIR}/examples/README.md ${CMAKE_SOURCE_DIR}/examples/a100-8stage.csv
              ${CMAKE_SOURCE_DIR}/dist/gpud.conf.example
              ${CMAKE_SOURCE_DIR}/python/examples/pipeline_gloo.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/perseus/examples COMPONENT tools)
file(GLOB PRS_DOCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${PRS_DOCS} ${CMAKE_SOURCE_DIR}/docs/grafana-dashboard.json
              ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/CHANGELOG.md
              ${CMAKE_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tools)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/img DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tools)
