# The chat-template engine against Python's jinja2: the 44 real templates of the shared test
# data x 5 conversations, and the language feature by feature (tests/templates/*.py).
triad_pytest(templates_jinja2 templates)
set_property(TEST templates_jinja2 APPEND PROPERTY ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
