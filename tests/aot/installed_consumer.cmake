# ctest -R AOT.Installed: installs kiln into a temporary prefix, configures and builds a consumer
# project against it with find_package(kiln) (a separate CMake project, as an outside user
# would), and runs its program, which must print "<PROGRAM>: ok". Inputs (-D): KILN_BUILD_DIR,
# KILN_SOURCE_DIR, WORK_DIR, GENERATOR, C_COMPILER (empty for a C++-only project: no C compiler
# is passed), CXX_COMPILER, LAUNCHER (may be empty), SANITIZE_FLAGS (may be empty), PROJECT_DIR
# (default examples/c_consumer), PROGRAM (default c_consumer).
cmake_minimum_required(VERSION 3.25)

function(run_step what)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
    endif()
    set(step_output "${out}" PARENT_SCOPE)
endfunction()

if(NOT PROJECT_DIR)
    set(PROJECT_DIR ${KILN_SOURCE_DIR}/examples/c_consumer)
endif()
if(NOT PROGRAM)
    set(PROGRAM c_consumer)
endif()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("installing kiln" ${CMAKE_COMMAND} --install ${KILN_BUILD_DIR} --prefix ${prefix})
foreach(f lib/cmake/kiln/kilnConfig.cmake lib/cmake/kiln/KilnKernel.cmake
          include/kiln/runtime/kiln_runtime.h include/kiln/driver/Generator.h
          include/kiln/kiln.h lib/libkiln_runtime.a lib/libkiln_generator.a)
    if(NOT EXISTS ${prefix}/${f})
        message(FATAL_ERROR "the install is missing ${f}")
    endif()
endforeach()

# The exported targets name no library by this machine's path (XGBoost is the imported target
# xgboost::xgboost that kilnConfig.cmake finds), so the install works on another machine.
file(STRINGS ${prefix}/lib/cmake/kiln/kilnTargets.cmake link_lines REGEX "INTERFACE_LINK_LIBRARIES")
foreach(line IN LISTS link_lines)
    if(line MATCHES "\"/|;/")
        message(FATAL_ERROR "the exported targets link a library by its path:\n${line}")
    endif()
endforeach()
file(READ ${prefix}/lib/cmake/kiln/kilnConfig.cmake config_text)
if(NOT config_text MATCHES "add_library\\(xgboost::xgboost UNKNOWN IMPORTED\\)")
    message(FATAL_ERROR "kilnConfig.cmake does not import xgboost::xgboost:\n${config_text}")
endif()

set(configure_args -S ${PROJECT_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(C_COMPILER)
    list(APPEND configure_args -DCMAKE_C_COMPILER=${C_COMPILER})
endif()
if(LAUNCHER)
    list(APPEND configure_args -DCMAKE_C_COMPILER_LAUNCHER=${LAUNCHER}
         -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
if(SANITIZE_FLAGS)
    list(APPEND configure_args "-DCMAKE_C_FLAGS=${SANITIZE_FLAGS}"
         "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
endif()
run_step("configuring ${PROJECT_DIR} against the install" ${CMAKE_COMMAND} ${configure_args})
run_step("building ${PROJECT_DIR}" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step("running ${PROGRAM}" ${WORK_DIR}/build/${PROGRAM})
if(NOT step_output MATCHES "${PROGRAM}: ok")
    message(FATAL_ERROR "${PROGRAM} did not print '${PROGRAM}: ok':\n${step_output}")
endif()
message(STATUS "${step_output}")
# The installed command line runs (it and kiln-worker are installed side by side); a project that
# exports its path (kiln::cli) gets the same executable.
set(cli ${prefix}/bin/kiln)
if(EXISTS ${WORK_DIR}/build/kiln_cli_path.txt)
    file(READ ${WORK_DIR}/build/kiln_cli_path.txt cli)
endif()
if(NOT EXISTS ${prefix}/bin/kiln-worker)
    message(FATAL_ERROR "the install is missing bin/kiln-worker")
endif()
run_step("running the installed ${cli} --help" ${cli} --help)
if(NOT step_output MATCHES "tune" OR NOT step_output MATCHES "compile")
    message(FATAL_ERROR "the installed kiln --help does not list tune and compile:\n${step_output}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
