# CPack: the Debian packages, built from any build folder with
#   cpack --config build/CPackConfig.cmake -G DEB -B <output folder>
# cairn_<version>_<arch>.deb (component "runtime": the daemon, its plugins,
# unit, sysusers/tmpfiles snippets, /etc/cairn/cairn.yaml as a conffile,
# manual and documents) and cairn-dev_<version>_all.deb (component
# "development": the plugin SDK headers, CMake package and cairn.pc). Both
# install under /usr whatever prefix the build folder was configured with:
# cmake/InstallLayout.cmake writes the prefix-dependent files at install time.
include(${PROJECT_SOURCE_DIR}/cmake/InstallLayout.cmake)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cairn)
set(CPACK_PACKAGE_VENDOR cairn)
set(CPACK_PACKAGE_CONTACT "cairn maintainers <cairn@localhost>" CACHE STRING
  "Maintainer field of the Debian packages")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Stage with DESTDIR and CMAKE_INSTALL_PREFIX=/usr (CPACK_INSTALL_PREFIX), so
# the layout code sees the prefix the package has, not the staging folder.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX ${CPACK_PACKAGING_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL runtime development)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

# cairn: Depends from dpkg-shlibdeps (the libraries the binary and plugins
# link), plus passwd for the account when systemd-sysusers is missing (a
# container). Recommends systemd, which runs it.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME cairn)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "systemd")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "postgresql")
# Descriptions: the first line is the synopsis.
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
  "durable workflow worker daemon for PostgreSQL
A fleet of cairn daemons executes multi-step workflows whose steps come from
shared-object plugins. Every step boundary is a checkpoint committed to
PostgreSQL with the step's audit events, so a run survives crashes of
workers, of the network and of the database, and is never executed by two
workers at once.")

# cairn-dev: headers only, so architecture-independent.
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME cairn-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS "nlohmann-json3-dev (>= 3)")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SUGGESTS "cairn, cmake, pkg-config")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
  "plugin SDK of cairn, the durable workflow worker daemon
The C plugin ABI (cairn/plugin.h) and the header-only C++ SDK
(cairn/sdk.hpp) for building step plugins, with a CMake package
(find_package(cairn), cairn_add_plugin()) and a pkg-config file.")

# Maintainer scripts and conffiles of the cairn package. The configuration
# in /etc is a conffile: dpkg keeps an operator's edits on upgrade and asks
# when the packaged reference changed too.
cairn_absolute_dir(cairn_package_sysconfdir "${CPACK_PACKAGING_INSTALL_PREFIX}" SYSCONFDIR
  "${CMAKE_INSTALL_SYSCONFDIR}")
set(cairn_debian_dir ${PROJECT_BINARY_DIR}/debian)
file(WRITE ${cairn_debian_dir}/conffiles "${cairn_package_sysconfdir}/cairn/cairn.yaml\n")
foreach(script postinst prerm)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/${script} ${cairn_debian_dir}/${script}
    COPYONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                              WORLD_READ WORLD_EXECUTE)
endforeach()
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  ${cairn_debian_dir}/conffiles ${cairn_debian_dir}/postinst ${cairn_debian_dir}/prerm)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
