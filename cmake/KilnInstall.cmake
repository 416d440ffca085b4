# Installation: `cmake --install <build> --prefix P` puts kiln's static libraries, headers, the
# generator support and a CMake package in P, so that an outside project can write
#   find_package(kiln REQUIRED)   # with CMAKE_PREFIX_PATH=P
#   target_link_libraries(app PRIVATE kiln::kiln)          # the C++ API
#   kiln_add_kernel(NAME k GENERATOR gen ...)              # ahead-of-time kernels
# Included at the end of the top-level CMakeLists.txt, once every target exists.
#
# What is installed is found from the targets, not listed by hand: every library target of this
# project that kiln, kiln_generator, kiln_apps, the tuner (kiln_autotune) and the database
# (kiln_tuning_db, kiln_tuning_db_apply) link (transitively), each exported as
# kiln::<name without the kiln_ prefix>, with the headers of its source folder under
# include/kiln/<folder>. The imported targets they link (OpenMP, ...) become find_dependency()
# calls in kilnConfig.cmake (XGBoost, which has no CMake package on Debian, is found there with
# find_library into the imported target xgboost::xgboost); LLVM's shared library is imported
# from LLVM's own target file. No library is linked by its absolute path, so the exported
# targets name no path of the build machine.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

function(_kiln_install_closure out_targets out_imported)
    set(seen)
    set(imported)
    set(todo ${ARGN})
    while(todo)
        list(POP_FRONT todo t)
        if(t MATCHES "^\\$<LINK_ONLY:(.+)>$")
            set(t ${CMAKE_MATCH_1})
        endif()
        if(NOT TARGET ${t})
            continue()
        endif()
        get_target_property(aliased ${t} ALIASED_TARGET)
        if(aliased)
            set(t ${aliased})
        endif()
        get_target_property(is_imported ${t} IMPORTED)
        if(is_imported)
            list(APPEND imported ${t})
            continue()
        endif()
        if(t IN_LIST seen)
            continue()
        endif()
        list(APPEND seen ${t})
        get_target_property(type ${t} TYPE)
        set(libs)
        if(NOT type STREQUAL "INTERFACE_LIBRARY")
            get_target_property(libs ${t} LINK_LIBRARIES)
        endif()
        get_target_property(ilibs ${t} INTERFACE_LINK_LIBRARIES)
        foreach(l IN LISTS libs ilibs)
            if(l AND NOT l MATCHES "-NOTFOUND$")
                list(APPEND todo ${l})
            endif()
            # A library linked by its path would be exported with this machine's path in it.
            if(l AND IS_ABSOLUTE "${l}")
                message(WARNING "kiln install: ${t} links '${l}' by its path, which the "
                                "installed targets would carry to other machines; link an "
                                "imported target instead (see xgboost::xgboost)")
            endif()
        endforeach()
    endwhile()
    list(REMOVE_DUPLICATES imported)
    set(${out_targets} ${seen} PARENT_SCOPE)
    set(${out_imported} ${imported} PARENT_SCOPE)
endfunction()

set(_kiln_roots kiln kiln_generator)
foreach(t kiln_apps kiln_operator_gen kiln_autotune kiln_tuning_db kiln_tuning_db_apply)
    if(TARGET ${t})
        list(APPEND _kiln_roots ${t})
    endif()
endforeach()
_kiln_install_closure(_kiln_targets _kiln_imported ${_kiln_roots})

foreach(t IN LISTS _kiln_targets)
    if(t STREQUAL "kiln")
        set_target_properties(${t} PROPERTIES EXPORT_NAME kiln)
    else()
        string(REGEX REPLACE "^kiln_" "" export_name ${t})
        set_target_properties(${t} PROPERTIES EXPORT_NAME ${export_name})
    endif()
    get_target_property(type ${t} TYPE)
    if(NOT type STREQUAL "EXECUTABLE")
        target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:include/kiln>)
    endif()
    # Each library's headers, from its source folder (tools/ has none that users include).
    get_target_property(dir ${t} SOURCE_DIR)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${dir})
    if(rel AND NOT rel STREQUAL "tools" AND NOT type STREQUAL "EXECUTABLE")
        install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/${rel}
                COMPONENT kiln FILES_MATCHING PATTERN "*.h" PATTERN "*.def"
                PATTERN "CMakeFiles" EXCLUDE
                # A module's private internals (tuning_db/DatabaseImpl.h, codegen/LLVMModuleImpl.h):
                # no installed header includes them.
                PATTERN "*Impl.h" EXCLUDE)
    endif()
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/kiln.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)

install(TARGETS ${_kiln_targets} EXPORT kilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR})
# The command line and the measuring worker it starts (found next to `kiln` in bin/), exported
# as kiln::cli and kiln::worker (kiln::kiln is the library).
foreach(t kiln-cli kiln-worker)
    if(TARGET ${t})
        string(REGEX REPLACE "^kiln-" "" export_name ${t})
        set_target_properties(${t} PROPERTIES EXPORT_NAME ${export_name})
        install(TARGETS ${t} EXPORT kilnTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
                COMPONENT kiln)
    endif()
endforeach()

# find_dependency() for each imported target the installed targets link.
set(KILN_CONFIG_DEPENDENCIES "")
set(_kiln_packages)
set(_kiln_llvm_import "")
set(_kiln_xgboost_import "")
foreach(t IN LISTS _kiln_imported)
    if(t MATCHES "^OpenMP::")
        list(APPEND _kiln_packages "OpenMP")
    elseif(t MATCHES "^nlohmann_json::")
        list(APPEND _kiln_packages "nlohmann_json 3")
    elseif(t MATCHES "^SQLite::")
        list(APPEND _kiln_packages "SQLite3")
    elseif(t MATCHES "^dlpack::")
        list(APPEND _kiln_packages "dlpack CONFIG")
    elseif(t MATCHES "^CLI11::")
        list(APPEND _kiln_packages "CLI11 CONFIG")
    elseif(t MATCHES "^CUDA::")
        list(APPEND _kiln_packages "CUDAToolkit")
    elseif(t MATCHES "^OpenCL::")
        list(APPEND _kiln_packages "OpenCL")
    elseif(t MATCHES "^Threads::")
        list(APPEND _kiln_packages "Threads")
    elseif(t STREQUAL "xgboost::xgboost")
        # The tuner's cost model. Debian's libxgboost-dev has no CMake package: find the library
        # where the user's machine has it (the build's directory is only a hint).
        get_target_property(_kiln_xgb_location xgboost::xgboost IMPORTED_LOCATION)
        if(_kiln_xgb_location)
            get_filename_component(_kiln_xgb_hint "${_kiln_xgb_location}" DIRECTORY)
        else()
            set(_kiln_xgb_hint "")
        endif()
        string(APPEND _kiln_xgboost_import
               "if(NOT TARGET xgboost::xgboost)\n"
               "    find_library(KILN_XGBOOST_LIBRARY NAMES xgboost HINTS \"${_kiln_xgb_hint}\")\n"
               "    if(NOT KILN_XGBOOST_LIBRARY)\n"
               "        set(kiln_FOUND FALSE)\n"
               "        set(kiln_NOT_FOUND_MESSAGE \"kiln's tuner (kiln::autotune) links XGBoost, "
               "and libxgboost was not found: install it (Debian: libxgboost-dev) or set "
               "KILN_XGBOOST_LIBRARY to the library's path\")\n"
               "        return()\n"
               "    endif()\n"
               "    add_library(xgboost::xgboost UNKNOWN IMPORTED)\n"
               "    set_target_properties(xgboost::xgboost PROPERTIES IMPORTED_LOCATION "
               "\"\${KILN_XGBOOST_LIBRARY}\")\n"
               "endif()\n")
    elseif(t STREQUAL "LLVM")
        # Only the shared libLLVM is linked: import LLVM's target file, not LLVMConfig.cmake,
        # whose find_package(LibEdit) compiles a C test and fails in a project without C
        # (project(app CXX)). LLVMConfig.cmake skips its own import when the user later calls
        # find_package(LLVM), so the two coexist.
        set(_kiln_llvm_import
            "if(NOT TARGET LLVM)\n    include(\"${LLVM_DIR}/LLVMExports.cmake\")\nendif()\n")
    elseif(t MATCHES "^LLVM")
        message(WARNING "kiln install: the installed targets link the LLVM component '${t}'; "
                        "kilnConfig.cmake imports only the shared libLLVM (target LLVM)")
    else()
        message(WARNING "kiln install: the installed targets link the imported target '${t}', "
                        "which kilnConfig.cmake does not know how to find; add it to "
                        "cmake/KilnInstall.cmake")
    endif()
endforeach()
list(REMOVE_DUPLICATES _kiln_packages)
foreach(p IN LISTS _kiln_packages)
    string(APPEND KILN_CONFIG_DEPENDENCIES "find_dependency(${p})\n")
endforeach()
string(APPEND KILN_CONFIG_DEPENDENCIES "${_kiln_xgboost_import}${_kiln_llvm_import}")

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/KilnKernel.cmake
        DESTINATION ${KILN_INSTALL_CMAKEDIR})
