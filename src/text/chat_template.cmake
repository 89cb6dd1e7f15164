# Chat templates (chat_template.h): a Jinja2-subset interpreter in jinja_*.cc and the ChatTemplate
# API over it.
add_library(convoy_chat_template
  chat_template.cc
  chat_template.h
  jinja_ast.h
  jinja_builtins.cc
  jinja_builtins.h
  jinja_eval.cc
  jinja_eval.h
  jinja_expression_parser.cc
  jinja_expression_parser.h
  jinja_filters.cc
  jinja_lexer.cc
  jinja_lexer.h
  jinja_operators.cc
  jinja_operators.h
  jinja_parser.cc
  jinja_parser.h
  jinja_strings.cc
  jinja_strings.h
  jinja_tests.cc
  jinja_value.cc
  jinja_value.h)
target_link_libraries(convoy_chat_template PUBLIC convoy_common absl::status absl::statusor
  PRIVATE absl::strings absl::cord nlohmann_json::nlohmann_json)
convoy_target_warnings(convoy_chat_template)
