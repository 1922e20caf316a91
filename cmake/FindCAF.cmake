# FindCAF: locates the C++ Actor Framework 0.17 (core and io). Debian's libcaf-dev ships no CMake
# config, so this module looks for the headers and libraries and checks the version.
#
# Defines the imported target CAF::caf (core + io + threads) and CAF_FOUND, CAF_VERSION.
find_path(CAF_INCLUDE_DIR NAMES caf/all.hpp caf/config.hpp)
find_library(CAF_CORE_LIBRARY NAMES caf_core)
find_library(CAF_IO_LIBRARY NAMES caf_io)

if(CAF_INCLUDE_DIR)
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+$")
  string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+)$" "\\1" _caf_version_num "${_caf_version_line}")
  if(_caf_version_num)
    math(EXPR _caf_major "${_caf_version_num} / 10000")
    math(EXPR _caf_minor "(${_caf_version_num} / 100) % 100")
    math(EXPR _caf_patch "${_caf_version_num} % 100")
    set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY
  VERSION_VAR CAF_VERSION)

if(CAF_FOUND AND NOT CAF_VERSION VERSION_LESS 0.18)
  message(FATAL_ERROR "Conveyor needs CAF 0.17.x, found ${CAF_VERSION} in ${CAF_INCLUDE_DIR}")
endif()

if(CAF_FOUND AND NOT TARGET CAF::caf)
  find_package(Threads REQUIRED)
  add_library(CAF::caf INTERFACE IMPORTED)
  set_target_properties(CAF::caf PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${CAF_IO_LIBRARY};${CAF_CORE_LIBRARY};Threads::Threads")
endif()
mark_as_advanced(CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY)
