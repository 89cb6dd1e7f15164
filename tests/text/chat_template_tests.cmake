# Chat templates against Jinja2's renders (fixtures written by
# scripts/fixtures/chat_template_fixtures.py), error reporting, limits and a fuzz-style test.
convoy_test(chat_template_test SOURCES chat_template_test.cc
  LIBS convoy_chat_template nlohmann_json::nlohmann_json)
convoy_test(chat_template_jinja_test SOURCES chat_template_jinja_test.cc
  LIBS convoy_chat_template nlohmann_json::nlohmann_json)
