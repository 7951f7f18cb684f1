# `cmake --install`: headers, the static and shared libraries, the CMake package (find_package(ratekeeper CONFIG)
# gives ratekeeper::ratekeeper, static, and ratekeeper::shared), a pkg-config file, and the ratekeeper command.
# `cpack -G DEB` in the build directory makes a .deb of the same.
include(CMakePackageConfigHelpers)

set(RK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ratekeeper)

install(TARGETS ratekeeper ratekeeper_shared EXPORT ratekeeperTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/ratekeeper DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ratekeeper_app RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The documentation, where examples/systemd/ratekeeper.service's Documentation= points (share/doc/ratekeeper/README.md),
# with CHANGELOG.md and docs/ beside it so that the README's links resolve.
install(FILES README.md CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(EXPORT ratekeeperTargets NAMESPACE ratekeeper:: DESTINATION ${RK_CMAKE_DIR})

configure_package_config_file(cmake/ratekeeperConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/ratekeeperConfig.cmake
  INSTALL_DESTINATION ${RK_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ratekeeperConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ratekeeperConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ratekeeperConfigVersion.cmake
  DESTINATION ${RK_CMAKE_DIR})

# pkg-config's paths are relative to its own prefix, so that a package installed anywhere (a .deb, a --prefix)
# finds itself.
file(RELATIVE_PATH RK_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(cmake/ratekeeper.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ratekeeper.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ratekeeper.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CPACK_PACKAGE_NAME ratekeeper)
set(CPACK_PACKAGE_VENDOR "ratekeeper")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Rate limiter: EARRRL, GCRA, buckets and windows, as a library and a service")
set(CPACK_PACKAGE_CONTACT "ratekeeper maintainers <ratekeeper@localhost>")
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # the libraries the ratekeeper command and the shared library link
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
