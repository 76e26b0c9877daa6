# The `triad tradeoff` report writer (src/quant/tradeoff_report.h): Pareto frontiers, the
# recommendation rules, JSON/Markdown/HTML renderings (escaping, degenerate inputs), write_report.
triad_gtest(tradeoff_report_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/tradeoff_report_test.cpp
  DEPS triad_quant nlohmann_json::nlohmann_json)
# The sample report rendered in headless Chromium (tests/quant/render_check.py: both charts in the
# browser's DOM with their circles, a screenshot that is not blank); skipped without Chromium.
set(TRIAD_TRADEOFF_SAMPLE_DIR ${CMAKE_BINARY_DIR}/tradeoff-report-sample)
add_test(NAME tradeoff_report_sample COMMAND tradeoff_report_test --gtest_filter=TradeoffReport.SampleReport)
set_tests_properties(tradeoff_report_sample PROPERTIES FIXTURES_SETUP tradeoff_report_sample LABELS cpp
  ENVIRONMENT "TRIAD_TRADEOFF_SAMPLE_DIR=${TRIAD_TRADEOFF_SAMPLE_DIR}")
add_test(NAME tradeoff_report_render
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/quant/render_check.py
          ${TRIAD_TRADEOFF_SAMPLE_DIR}/report.html ${TRIAD_TRADEOFF_SAMPLE_DIR}/report.png)
set_tests_properties(tradeoff_report_render PROPERTIES FIXTURES_REQUIRED tradeoff_report_sample
  SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS python)
