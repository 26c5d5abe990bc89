# CPack post-build script (cmake/package.cmake): the library's package registers with ldconfig
# through its trigger alone, as Debian's library packages do, so the ldconfig calls CPack always
# writes into a package holding a shared library under /usr/lib are taken out of it again: the
# package is unpacked, its postinst and postrm removed, and it is built again.
foreach(deb IN LISTS CPACK_PACKAGE_FILES)
  get_filename_component(name "${deb}" NAME)
  if(NOT name MATCHES "^libperseus[0-9]+_")
    continue()
  endif()
  set(root "${deb}.root")
  file(REMOVE_RECURSE "${root}")
  execute_process(COMMAND dpkg-deb -R "${deb}" "${root}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dpkg-deb -R ${deb} failed")
  endif()
  file(REMOVE "${root}/DEBIAN/postinst" "${root}/DEBIAN/postrm")
  execute_process(COMMAND dpkg-deb --root-owner-group --build "${root}" "${deb}"
                  OUTPUT_QUIET RESULT_VARIABLE rc)
  file(REMOVE_RECURSE "${root}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dpkg-deb --build ${deb} failed")
  endif()
endforeach()
