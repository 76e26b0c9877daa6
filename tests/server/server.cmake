# The HTTP server with the official `openai` SDK against real `triad serve` processes on
# loopback (stories260K and the tiny random Llama 2 from the shared test data; the default
# Qwen2.5-Coder-0.5B-Instruct and Gemma 3 models when they have been fetched).
triad_pytest(server_openai server)
set_property(TEST server_openai APPEND PROPERTY ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
# The browser tests' screenshots (chat page, dashboard under load) land in the build tree.
set_property(TEST server_openai APPEND PROPERTY ENVIRONMENT "TRIAD_SCREENSHOT_DIR=${CMAKE_BINARY_DIR}/screenshots")
set_tests_properties(server_openai PROPERTIES TIMEOUT 900)
