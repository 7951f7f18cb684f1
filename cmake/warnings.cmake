# Warnings and sanitizers apply to ratekeeper's own targets only, never to whoever links the library.
function(rk_private_flags target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
    -Wno-missing-field-initializers)  # designated initializers leave fields to their defaults on purpose
  if(RK_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(RK_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${RK_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${RK_SANITIZE})
    if(RK_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # Boost.Asio uses std::atomic_thread_fence, which GCC warns TSan does not model; the warning is about
      # Boost's headers, not our code.
      target_compile_options(${target} PRIVATE -Wno-tsan)
    endif()
  endif()
endfunction()
