# kiln_add_kernel: runs a kiln generator at build time and defines a library target for the
# kernel it writes.
#
#   kiln_add_kernel(NAME <name> GENERATOR <generator executable target>
#                   [GENERATOR_NAME <registered generator>] [FUNCTION_NAME <C function>]
#                   [TARGET host|host-cuda|host-opencl|<target string>]
#                   [TARGETS <target> <target> ...] [PARAMS key=value ...]
#                   [EMIT assembly llvm_ir object ...])
#
# Writes <name>.a, <name>.h, <name>.json and <name>.stmt (plus the EMIT kinds) into
# ${CMAKE_CURRENT_BINARY_DIR}/<name>.kiln/ and defines the IMPORTED static library target <name>:
# link it to get the kernel, its header directory, kiln::runtime, OpenMP and libm. The function
# is called FUNCTION_NAME (default <name>). GENERATOR_NAME may be left out when the executable
# registers one generator. TARGET defaults to "host" (the machine that builds); "host-cuda" and
# "host-opencl" add GPU kernels (CUDA objects embed PTX and cubins for sm_80 and sm_90);
# "host$<SEMICOLON>fast_math=1" changes one field (write the target string's semicolons as
# $<SEMICOLON>, since CMake splits lists at ';'). A CPU name LLVM knows gives portable code:
# "x86-64-v2", "x86-64-v3", "x86-64-v4", "skylake-avx512", "znver4", ... (also with -cuda,
# -opencl and ;key=value). TARGETS (instead of TARGET) builds a multi-target kernel: one variant
# per target in one library, and an entry point that runs, at each call, the first listed variant
# whose CPU features the running CPU has, else the last (list the most portable last);
# KILN_FORCE_TARGET=<name or index> or kiln_force_target() overrides the choice. The generator
# is run with one -t per target. The kernel is regenerated when the generator executable changes.
#
#   kiln_add_kernel(NAME <name> GENERATOR <generator> SHAPES 4096x4096 1920x1080
#                   DB tuning_db/kiln.db [LOCKFILE kiln.lock.json] [TARGET t | TARGETS t ...]
#                   [THREADS n] [PARAMS k=v ...])
#
# builds one library whose entry point runs, at each call, the schedule of the output's extents:
# for each shape the best ok record of the generator's workload (the generator with PARAMS, at
# that shape) on this target (and THREADS, the thread count it was tuned with; default: the
# building machine's) in DB, else the LOCKFILE's schedule (kiln.lock.json, committed: a
# build without the database gives the same kernel; `kiln lock update` refreshes it), else the
# generator's own schedule; any other shape runs the generator's own schedule. The header says
# where each came from. Relative DB and LOCKFILE paths are from the current source directory.
# With TARGETS, each target's variant is shape-dispatched the same way, with the records of its
# own target key (a target without them uses the LOCKFILE, then the generator's schedule), and
# the entry point picks the target by CPU features first.
include_guard(GLOBAL)

function(kiln_add_kernel)
    cmake_parse_arguments(ARG ""
                          "NAME;GENERATOR;GENERATOR_NAME;FUNCTION_NAME;TARGET;DB;LOCKFILE;THREADS"
                          "TARGETS;PARAMS;EMIT;SHAPES" ${ARGN})
    if(ARG_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR "kiln_add_kernel: unexpected arguments '${ARG_UNPARSED_ARGUMENTS}'; "
                            "known: NAME GENERATOR GENERATOR_NAME FUNCTION_NAME TARGET TARGETS "
                            "PARAMS EMIT SHAPES DB LOCKFILE THREADS")
    endif()
    if(NOT ARG_NAME)
        message(FATAL_ERROR "kiln_add_kernel: NAME is required (the kernel's target and file name)")
    endif()
    if(NOT ARG_GENERATOR)
        message(FATAL_ERROR "kiln_add_kernel(${ARG_NAME}): GENERATOR is required: an executable "
                            "target that links kiln::generator")
    endif()
    if(NOT TARGET ${ARG_GENERATOR})
        message(FATAL_ERROR "kiln_add_kernel(${ARG_NAME}): GENERATOR '${ARG_GENERATOR}' is not a "
                            "target; define it first with add_executable(... ) and link "
                            "kiln::generator")
    endif()
    if(TARGET ${ARG_NAME})
        message(FATAL_ERROR "kiln_add_kernel: a target named '${ARG_NAME}' already exists; "
                            "choose another NAME")
    endif()
    if(NOT ARG_FUNCTION_NAME)
        set(ARG_FUNCTION_NAME ${ARG_NAME})
    endif()
    if(ARG_TARGET AND ARG_TARGETS)
        message(FATAL_ERROR "kiln_add_kernel(${ARG_NAME}): give TARGET (one target) or TARGETS "
                            "(a multi-target kernel), not both")
    endif()
    if("TARGETS" IN_LIST ARG_KEYWORDS_MISSING_VALUES)
        message(FATAL_ERROR "kiln_add_kernel(${ARG_NAME}): TARGETS needs at least one target, "
                            "e.g. TARGETS x86-64-v4 x86-64-v3")
    endif()
    if((ARG_DB OR ARG_LOCKFILE) AND NOT ARG_SHAPES)
        message(FATAL_ERROR "kiln_add_kernel(${ARG_NAME}): DB and LOCKFILE select tuned schedules "
                            "per shape; list the shapes with SHAPES, e.g. SHAPES 4096x4096")
    endif()
    if(ARG_SHAPES AND NOT (ARG_DB OR ARG_LOCKFILE))
        message(FATAL_ERROR "kiln_add_kernel(${ARG_NAME}): SHAPES needs DB (the tuning database) "
                            "or LOCKFILE (kiln.lock.json) to find each shape's schedule")
    endif()
    if(ARG_THREADS AND NOT ARG_SHAPES)
        message(FATAL_ERROR "kiln_add_kernel(${ARG_NAME}): THREADS selects the records tuned with "
                            "that many threads; it needs SHAPES")
    endif()
    if(NOT ARG_TARGET)
        set(ARG_TARGET host)
    endif()
    set(target_args -t "${ARG_TARGET}")
    if(ARG_TARGETS)
        set(target_args)
        foreach(t IN LISTS ARG_TARGETS)
            list(APPEND target_args -t "${t}")
        endforeach()
    endif()
    if(TARGET kiln::runtime)
        set(runtime kiln::runtime)
    else()
        message(FATAL_ERROR "kiln_add_kernel(${ARG_NAME}): kiln::runtime is not defined; call "
                            "find_package(kiln) (or add kiln's source tree) first")
    endif()

    set(dir ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}.kiln)
    file(MAKE_DIRECTORY ${dir})
    set(kinds static_library c_header metadata lowered_stmt ${ARG_EMIT})
    list(REMOVE_DUPLICATES kinds)
    set(outputs)
    foreach(kind IN LISTS kinds)
        if(kind STREQUAL "object")
            list(APPEND outputs ${dir}/${ARG_NAME}.o)
        elseif(kind STREQUAL "static_library")
            list(APPEND outputs ${dir}/${ARG_NAME}.a)
        elseif(kind STREQUAL "c_header")
            list(APPEND outputs ${dir}/${ARG_NAME}.h)
        elseif(kind STREQUAL "assembly")
            list(APPEND outputs ${dir}/${ARG_NAME}.s)
        elseif(kind STREQUAL "llvm_ir")
            list(APPEND outputs ${dir}/${ARG_NAME}.ll)
        elseif(kind STREQUAL "lowered_stmt")
            list(APPEND outputs ${dir}/${ARG_NAME}.stmt)
        elseif(kind STREQUAL "metadata")
            list(APPEND outputs ${dir}/${ARG_NAME}.json)
        else()
            message(FATAL_ERROR "kiln_add_kernel(${ARG_NAME}): unknown EMIT kind '${kind}' (known: "
                                "object static_library c_header assembly llvm_ir lowered_stmt "
                                "metadata)")
        endif()
    endforeach()
    list(JOIN kinds "," emit)

    set(generator_args)
    if(ARG_GENERATOR_NAME)
        set(generator_args -g ${ARG_GENERATOR_NAME})
    endif()
    set(shape_args)
    set(depends ${ARG_GENERATOR})
    if(ARG_SHAPES)
        list(JOIN ARG_SHAPES "," shapes)
        set(shape_args --shapes ${shapes})
        if(ARG_THREADS)
            list(APPEND shape_args --threads ${ARG_THREADS})
        endif()
        foreach(kind DB LOCKFILE)
            if(ARG_${kind})
                cmake_path(ABSOLUTE_PATH ARG_${kind} BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
                if(kind STREQUAL "DB")
                    list(APPEND shape_args --db ${ARG_DB})
                else()
                    list(APPEND shape_args --lock ${ARG_LOCKFILE})
                endif()
                # Rebuilt when the file changes (when it exists at configure time).
                if(EXISTS ${ARG_${kind}})
                    list(APPEND depends ${ARG_${kind}})
                endif()
            endif()
        endforeach()
    endif()
    add_custom_command(
        OUTPUT ${outputs}
        COMMAND ${ARG_GENERATOR} -o ${dir} -n ${ARG_NAME} -f ${ARG_FUNCTION_NAME}
                ${target_args} -e ${emit} ${generator_args} ${shape_args} ${ARG_PARAMS}
        DEPENDS ${depends}
        COMMENT "kiln: generating kernel ${ARG_NAME} with ${ARG_GENERATOR}"
        VERBATIM)
    add_custom_target(${ARG_NAME}_kiln_generate DEPENDS ${outputs})

    add_library(${ARG_NAME} STATIC IMPORTED GLOBAL)
    set_target_properties(${ARG_NAME} PROPERTIES
        IMPORTED_LOCATION ${dir}/${ARG_NAME}.a
        INTERFACE_INCLUDE_DIRECTORIES ${dir})
    set(libm)
    if(UNIX AND NOT APPLE)
        set(libm m)
    endif()
    target_link_libraries(${ARG_NAME} INTERFACE ${runtime} ${libm})
    add_dependencies(${ARG_NAME} ${ARG_NAME}_kiln_generate)
endfunction()
