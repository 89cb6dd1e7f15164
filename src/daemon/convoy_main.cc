// convoy: the command-line client of convoyd.
//   convoy generate --addr HOST:PORT --token-ids 1,2,3 | --prompt TEXT | --chat TEXT [--system
//   TEXT]
//                   [--max-tokens N --temperature T --top-k K --top-p P --min-p P --seed S
//                   --stop-token-ids 2 --stop TEXT --priority P --timeout-ms T]
//                   [--presence-penalty X --frequency-penalty X --repetition-penalty X
//                   --logit-bias ID=BIAS,...]
//                   [--logprobs] [--top-logprobs N] [--n N] [--stream] [--json]
//                   [--json-schema FILE | --json-object | --regex RE | --grammar FILE |
//                    --choices A|B|C]
//   convoy chat --addr HOST:PORT [--system TEXT] [sampling flags]   an interactive chat, streamed
//   convoy health --addr HOST:PORT [--service NAME]    exit 0 only when SERVING
//   convoy info --addr HOST:PORT                       model and server information as JSON
// Exit codes: 0 success, 1 the call failed (the status is printed on stderr), 2 bad usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "convoy/v1/inference.grpc.pb.h"
#include "frontend/status_mapping.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "nlohmann/json.hpp"
#include "tools/cli_flags.h"

ABSL_FLAG(std::string, addr, "127.0.0.1:50051", "convoyd's address, HOST:PORT");
ABSL_FLAG(std::string, model, "", "Model name (default: the one the server serves)");
ABSL_FLAG(std::string, token_ids, "", "The prompt: comma-separated token ids");
ABSL_FLAG(std::string, prompt, "",
          "The prompt as text, for a model with a tokenizer (instead of --token-ids)");
ABSL_FLAG(std::string, chat, "",
          "One user message, sent through the model's chat template (instead of --prompt)");
ABSL_FLAG(std::string, system, "", "With --chat or `convoy chat`: a system message first");
ABSL_FLAG(std::string, stop, "", "A stop string: generation ends before the text contains it");
ABSL_FLAG(int32_t, max_tokens, 0, "Tokens to generate at most (unset: the server's default)");
ABSL_FLAG(float, temperature, 0.0f, "Sampling temperature; 0 is greedy");
ABSL_FLAG(int32_t, top_k, 0, "Sample among the k most likely tokens; 0 for all");
ABSL_FLAG(float, top_p, 1.0f, "Nucleus sampling mass, in (0, 1]");
ABSL_FLAG(uint64_t, seed, 0, "Sampling seed (same seed, same tokens)");
ABSL_FLAG(float, min_p, 0.0f,
          "Keep tokens at least this fraction as likely as the most likely one; 0 keeps all");
ABSL_FLAG(float, presence_penalty, 0.0f,
          "Subtracted from the logit of every token generated so far, in [-2, 2]");
ABSL_FLAG(float, frequency_penalty, 0.0f,
          "Subtracted once per time a token was generated so far, in [-2, 2]");
ABSL_FLAG(float, repetition_penalty, 1.0f,
          "Divides positive logits (multiplies negative ones) of tokens seen so far; 1 for none");
ABSL_FLAG(std::string, logit_bias, "",
          "Comma-separated ID=BIAS pairs added to those tokens' logits, each bias in [-100, 100]");
ABSL_FLAG(std::string, stop_token_ids, "", "Comma-separated token ids that end generation");
ABSL_FLAG(int32_t, priority, 0, "1 is the highest; 0 takes the server's default");
ABSL_FLAG(int64_t, timeout_ms, 0, "The call's deadline in milliseconds; 0 for none");
ABSL_FLAG(bool, logprobs, false, "Return each token's log-probability");
ABSL_FLAG(int32_t, top_logprobs, 0, "Also return the N most likely tokens per step");
ABSL_FLAG(int32_t, n, 1,
          "Choices: generate N answers to the prompt (choice i with --seed + i), each printed "
          "under its index");
ABSL_FLAG(bool, stream, false, "Print tokens as they are generated");
ABSL_FLAG(bool, json, false, "Print the response as one JSON object");
ABSL_FLAG(std::string, json_schema, "",
          "Structured output: a JSON Schema file; the answer is one JSON value valid under it");
ABSL_FLAG(bool, json_object, false, "Structured output: the answer is a JSON object");
ABSL_FLAG(std::string, regex, "", "Structured output: a regular expression the answer matches");
ABSL_FLAG(std::string, grammar, "", "Structured output: a GBNF grammar file (its rule root)");
ABSL_FLAG(std::string, choices, "", "Structured output: the answer is one of these, |-separated");
ABSL_FLAG(std::string, tls_ca, "",
          "TLS: trust the server's certificate when this CA (a PEM file) signed it; without it "
          "the connection is plain text");
ABSL_FLAG(std::string, tls_cert, "", "Mutual TLS: this client's certificate chain (a PEM file)");
ABSL_FLAG(std::string, tls_key, "", "Mutual TLS: this client's private key (a PEM file)");
ABSL_FLAG(std::string, api_key, "",
          "The API key, sent as `authorization: Bearer KEY` (default: $CONVOY_API_KEY)");
ABSL_FLAG(std::string, service, "", "health: the service to ask about; empty: the whole server");

namespace {

namespace v1 = convoy::v1;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr int kFailed = 1;
constexpr int kMaxMessageBytes = 64 << 20;

const convoy::cli::CommandLine kTop = {
    "convoy",
    "convoy generate|chat|health|info --addr HOST:PORT [flags]\n\n"
    "  generate  --token-ids 1,2,3 | --prompt TEXT | --chat TEXT [--system TEXT] [--max-tokens N\n"
    "            --temperature T --top-k K --top-p P --min-p P --seed S --stop-token-ids 2\n"
    "            --stop TEXT --priority P --timeout-ms T] [--presence-penalty X\n"
    "            --frequency-penalty X --repetition-penalty X --logit-bias ID=BIAS,...]\n"
    "            [--logprobs] [--top-logprobs N] [--n N] [--stream] [--json]\n"
    "            [--json-schema FILE | --json-object | --regex RE | --grammar FILE |\n"
    "            --choices A|B|C]\n"
    "  chat      an interactive chat through the model's chat template, streamed [--system TEXT\n"
    "            sampling flags]\n"
    "  health    [--service NAME]: exit 0 only when SERVING\n"
    "  info      model and server information as JSON\n\n"
    "Connection flags of every command: --tls-ca FILE (TLS), --tls-cert FILE --tls-key FILE\n"
    "(mutual TLS), --api-key KEY (or $CONVOY_API_KEY).\n"
    "Run 'convoy COMMAND --help' for a command's flags.",
    {},
    {}};

const convoy::cli::CommandLine kGenerate = {
    "convoy generate",
    "convoy generate --addr HOST:PORT --token-ids 1,2,3 | --prompt TEXT | --chat TEXT [flags]\n\n"
    "Generates from the prompt: token ids, raw text, or one user turn (--chat, with an optional\n"
    "--system message) through the model's chat template. --stream prints text as it comes;\n"
    "--json prints one JSON object (with --stream, one per message, the last one the whole\n"
    "response) with prompt_token_ids, token_ids, text, logprobs and finish_reason. --n N asks\n"
    "for N answers (choices), each printed under its index (in --json, a list \"choices\"; with\n"
    "--stream, each choice once it has ended, and each JSON message has its choice_index).\n"
    "Structured output (at most one): --json-schema FILE, --json-object, --regex RE, --grammar\n"
    "FILE (GBNF) or --choices A|B|C holds the answer to it (docs/grammar.md).",
    {"addr",
     "tls_ca",
     "tls_cert",
     "tls_key",
     "api_key",
     "model",
     "token_ids",
     "prompt",
     "chat",
     "system",
     "max_tokens",
     "temperature",
     "top_k",
     "top_p",
     "min_p",
     "presence_penalty",
     "frequency_penalty",
     "repetition_penalty",
     "logit_bias",
     "seed",
     "stop_token_ids",
     "stop",
     "priority",
     "timeout_ms",
     "logprobs",
     "top_logprobs",
     "n",
     "stream",
     "json",
     "json_schema",
     "json_object",
     "regex",
     "grammar",
     "choices"},
    {}};

const convoy::cli::CommandLine kChat = {
    "convoy chat",
    "convoy chat --addr HOST:PORT [--system TEXT] [--max-tokens N --temperature T --top-k K\n"
    "            --top-p P --seed S --stop TEXT]\n\n"
    "An interactive chat: each line you type is a user message; the answer streams back and\n"
    "the conversation goes on. An empty line or end of input (Ctrl-D) ends it.",
    {"addr",
     "tls_ca",
     "tls_cert",
     "tls_key",
     "api_key",
     "model",
     "system",
     "max_tokens",
     "temperature",
     "top_k",
     "top_p",
     "min_p",
     "presence_penalty",
     "frequency_penalty",
     "repetition_penalty",
     "logit_bias",
     "seed",
     "stop",
     "priority",
     "timeout_ms"},
    {}};

const convoy::cli::CommandLine kHealth = {
    "convoy health",
    "convoy health --addr HOST:PORT [--service NAME] [--timeout-ms T]\n\n"
    "Prints the grpc.health.v1 status; exit 0 only when SERVING.",
    {"addr", "tls_ca", "tls_cert", "tls_key", "service", "timeout_ms"},
    {}};

const convoy::cli::CommandLine kInfo = {
    "convoy info",
    "convoy info --addr HOST:PORT [--timeout-ms T]\n\nPrints the model and server "
    "information as one JSON object.",
    {"addr", "tls_ca", "tls_cert", "tls_key", "api_key", "timeout_ms"},
    {}};

// The flags given on the command line.
convoy::cli::ParsedFlags parsed_flags;
bool Given(const std::string& flag) { return parsed_flags.specified.count(flag) > 0; }

// The content of the file a flag names; exits the process (with the flag's name) when it cannot
// be read.
std::string ReadFlagFile(const std::string& path, const char* flag) {
  std::ifstream in(path);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (!in || text.str().empty()) {
    std::cerr << "convoy: --" << flag << ": cannot read '" << path << "' (or it is empty)\n";
    std::exit(kFailed);
  }
  return text.str();
}

std::shared_ptr<grpc::ChannelCredentials> Credentials() {
  const std::string ca = absl::GetFlag(FLAGS_tls_ca);
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  if (ca.empty() && cert.empty() && key.empty()) return grpc::InsecureChannelCredentials();
  if (cert.empty() != key.empty()) {
    std::cerr << "convoy: --tls-cert and --tls-key go together\n";
    std::exit(kFailed);
  }
  grpc::SslCredentialsOptions ssl;
  if (!ca.empty()) ssl.pem_root_certs = ReadFlagFile(ca, "tls-ca");
  if (!cert.empty()) {
    ssl.pem_cert_chain = ReadFlagFile(cert, "tls-cert");
    ssl.pem_private_key = ReadFlagFile(key, "tls-key");
  }
  return grpc::SslCredentials(ssl);
}

// A channel to --addr, connected first: a connection attempt that fails is tried again, every
// 100 ms at first, for up to a second (or --timeout-ms, when shorter). One process makes one call,
// and a call made on an unconnected channel fails at the first failed attempt; gRPC 1.51 (Debian
// 12's) can report a connect still in progress as failed, with an unrelated errno ("No such file
// or directory"; grpc/grpc#35064, fixed in later versions). When it does not connect, the call
// still goes, and fails with gRPC's own account of why (connection refused, ...).
std::shared_ptr<grpc::Channel> Connect() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(absl::GetFlag(FLAGS_addr), Credentials(), args);
  int64_t connect_ms = 1000;
  if (absl::GetFlag(FLAGS_timeout_ms) > 0) {
    connect_ms = std::min(connect_ms, absl::GetFlag(FLAGS_timeout_ms));
  }
  channel->WaitForConnected(std::chrono::system_clock::now() +
                            std::chrono::milliseconds(connect_ms));
  return channel;
}

// The call's deadline (--timeout-ms, or `default_ms`; 0: none) and API key.
void SetDeadline(grpc::ClientContext* context, int64_t default_ms) {
  std::string key = absl::GetFlag(FLAGS_api_key);
  if (key.empty()) {
    const char* env = std::getenv("CONVOY_API_KEY");
    if (env != nullptr) key = env;
  }
  if (!key.empty()) context->AddMetadata("authorization", "Bearer " + key);
  const int64_t ms =
      absl::GetFlag(FLAGS_timeout_ms) > 0 ? absl::GetFlag(FLAGS_timeout_ms) : default_ms;
  if (ms > 0)
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

int RpcFailed(const grpc::Status& status) {
  std::cerr << "convoy: the call failed: "
            << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())) << ": "
            << status.error_message() << "\n";
  return kFailed;
}

bool ParseIds(const std::string& text, google::protobuf::RepeatedField<int32_t>* out) {
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(piece, &id)) return false;
    out->Add(id);
  }
  return true;
}

nlohmann::json TopLogprobsJson(const google::protobuf::RepeatedPtrField<v1::TopLogprobs>& tops) {
  nlohmann::json out = nlohmann::json::array();
  for (const v1::TopLogprobs& step : tops) {
    nlohmann::json entry = nlohmann::json::array();
    for (int i = 0; i < step.token_ids_size() && i < step.logprobs_size(); ++i) {
      entry.push_back({{"token_id", step.token_ids(i)}, {"logprob", step.logprobs(i)}});
    }
    out.push_back(entry);
  }
  return out;
}

// One answer's fields (of an InferResponse, or of one of its choices) into `*j`.
template <typename Answer>
void AddAnswerJson(const Answer& a, nlohmann::json* j) {
  (*j)["token_ids"] = std::vector<int32_t>(a.token_ids().begin(), a.token_ids().end());
  (*j)["text"] = a.text();
  (*j)["logprobs"] = std::vector<float>(a.logprobs().begin(), a.logprobs().end());
  if (a.top_logprobs_size() > 0) (*j)["top_logprobs"] = TopLogprobsJson(a.top_logprobs());
  (*j)["finish_reason"] = convoy::FinishReasonText(a.finish_reason());
  (*j)["seed"] = a.seed();  // the request's, or the one the server drew for it
  (*j)["timings"] = {{"queue_us", a.timings().queue_microseconds()},
                     {"time_to_first_token_us", a.timings().time_to_first_token_microseconds()},
                     {"total_us", a.timings().total_microseconds()}};
}

// The whole response, as `generate --json` prints it: with several choices, their answers in
// "choices".
nlohmann::json ResponseJson(const v1::InferResponse& r) {
  nlohmann::json j;
  j["request_id"] = r.request_id();
  j["model"] = r.model();
  j["prompt_token_ids"] =
      std::vector<int32_t>(r.prompt_token_ids().begin(), r.prompt_token_ids().end());
  j["usage"] = {{"prompt_tokens", r.usage().prompt_tokens()},
                {"cached_prompt_tokens", r.usage().cached_prompt_tokens()},
                {"completion_tokens", r.usage().completion_tokens()}};
  if (r.choices_size() == 0) {
    AddAnswerJson(r, &j);
    return j;
  }
  j["choices"] = nlohmann::json::array();
  for (const v1::Choice& c : r.choices()) {
    nlohmann::json choice = {{"index", c.index()}, {"request_id", c.request_id()}};
    AddAnswerJson(c, &choice);
    j["choices"].push_back(std::move(choice));
  }
  return j;
}

template <typename Answer>
void PrintAnswer(const Answer& a) {
  if (!a.text().empty()) std::cout << a.text() << "\n";
  std::cout << absl::StrJoin(a.token_ids(), " ") << "  ["
            << convoy::FinishReasonText(a.finish_reason()) << "]\n";
  if (a.logprobs_size() > 0) std::cout << "logprobs: " << absl::StrJoin(a.logprobs(), " ") << "\n";
}

// Each choice under its index when there are several.
void PrintPlain(const v1::InferResponse& r) {
  if (r.choices_size() == 0) PrintAnswer(r);
  for (const v1::Choice& c : r.choices()) {
    std::cout << "[choice " << c.index() << "]\n";
    PrintAnswer(c);
  }
}

// Adds a stream message's output to its answer (the response's own fields, or a choice's).
template <typename Answer>
void AddStreamed(const v1::InferStreamResponse& message, Answer* answer) {
  answer->mutable_token_ids()->MergeFrom(message.token_ids());
  answer->mutable_logprobs()->MergeFrom(message.logprobs());
  answer->mutable_top_logprobs()->MergeFrom(message.top_logprobs());
  answer->mutable_text()->append(message.text());
  if (message.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) return;
  answer->set_finish_reason(message.finish_reason());
  *answer->mutable_timings() = message.timings();
  answer->set_seed(message.seed());
}

// The sampling flags that were given: the server fills the rest with its defaults. False (the
// usage printed) for a malformed list.
bool SetSampling(const convoy::cli::CommandLine& command, v1::InferRequest* request) {
  request->set_model(absl::GetFlag(FLAGS_model));
  v1::SamplingParameters* s = request->mutable_sampling();
  if (Given("max_tokens")) s->set_max_tokens(absl::GetFlag(FLAGS_max_tokens));
  if (Given("temperature")) s->set_temperature(absl::GetFlag(FLAGS_temperature));
  if (Given("top_k")) s->set_top_k(absl::GetFlag(FLAGS_top_k));
  if (Given("top_p")) s->set_top_p(absl::GetFlag(FLAGS_top_p));
  if (Given("seed")) s->set_seed(absl::GetFlag(FLAGS_seed));
  if (Given("min_p")) s->set_min_p(absl::GetFlag(FLAGS_min_p));
  if (Given("presence_penalty")) s->set_presence_penalty(absl::GetFlag(FLAGS_presence_penalty));
  if (Given("frequency_penalty")) s->set_frequency_penalty(absl::GetFlag(FLAGS_frequency_penalty));
  if (Given("repetition_penalty")) {
    s->set_repetition_penalty(absl::GetFlag(FLAGS_repetition_penalty));
  }
  if (Given("logit_bias")) {
    for (absl::string_view pair : absl::StrSplit(absl::GetFlag(FLAGS_logit_bias), ',')) {
      const std::vector<absl::string_view> parts = absl::StrSplit(pair, '=');
      int32_t token = 0;
      float bias = 0.0f;
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &token) ||
          !absl::SimpleAtof(parts[1], &bias)) {
        convoy::cli::BadUsage(command, "--logit-bias must be comma-separated ID=BIAS pairs");
        return false;
      }
      (*s->mutable_logit_bias())[token] = bias;
    }
  }
  if (Given("stop")) s->add_stop(absl::GetFlag(FLAGS_stop));
  if (Given("stop_token_ids") &&
      !ParseIds(absl::GetFlag(FLAGS_stop_token_ids), s->mutable_stop_token_ids())) {
    convoy::cli::BadUsage(command, "--stop-token-ids must be comma-separated integers");
    return false;
  }
  request->set_priority(absl::GetFlag(FLAGS_priority));
  return true;
}

void AddMessage(const std::string& role, const std::string& content, v1::InferRequest* request) {
  v1::ChatMessage* message = request->add_messages();
  message->set_role(role);
  message->set_content(content);
}

int Generate() {
  v1::InferRequest request;
  const int prompts = !absl::GetFlag(FLAGS_token_ids).empty() +
                      !absl::GetFlag(FLAGS_prompt).empty() + !absl::GetFlag(FLAGS_chat).empty();
  if (prompts != 1) {
    return convoy::cli::BadUsage(
        kGenerate, "give the prompt as one of --token-ids 1,2,3, --prompt TEXT or --chat TEXT");
  }
  if (Given("system") && absl::GetFlag(FLAGS_chat).empty()) {
    return convoy::cli::BadUsage(kGenerate, "--system goes with --chat");
  }
  request.set_prompt_text(absl::GetFlag(FLAGS_prompt));
  if (!absl::GetFlag(FLAGS_chat).empty()) {
    if (Given("system")) AddMessage("system", absl::GetFlag(FLAGS_system), &request);
    AddMessage("user", absl::GetFlag(FLAGS_chat), &request);
  }
  if (!ParseIds(absl::GetFlag(FLAGS_token_ids), request.mutable_prompt_token_ids())) {
    return convoy::cli::BadUsage(kGenerate, "--token-ids must be comma-separated integers");
  }
  if (!SetSampling(kGenerate, &request)) return convoy::cli::kBadUsage;
  if (Given("json_schema") + Given("json_object") + Given("regex") + Given("grammar") +
          Given("choices") >
      1) {
    return convoy::cli::BadUsage(
        kGenerate,
        "give at most one of --json-schema, --json-object, --regex, --grammar, --choices");
  }
  v1::OutputConstraint* constraint = request.mutable_constraint();
  if (Given("json_schema")) {
    constraint->set_json_schema(ReadFlagFile(absl::GetFlag(FLAGS_json_schema), "json-schema"));
  } else if (Given("json_object")) {
    constraint->set_json_object(absl::GetFlag(FLAGS_json_object));
  } else if (Given("regex")) {
    constraint->set_regex(absl::GetFlag(FLAGS_regex));
  } else if (Given("grammar")) {
    constraint->set_grammar(ReadFlagFile(absl::GetFlag(FLAGS_grammar), "grammar"));
  } else if (Given("choices")) {
    for (absl::string_view choice : absl::StrSplit(absl::GetFlag(FLAGS_choices), '|')) {
      constraint->mutable_choices()->add_choices(std::string(choice));
    }
  } else {
    request.clear_constraint();
  }
  request.set_return_logprobs(absl::GetFlag(FLAGS_logprobs));
  request.set_top_logprobs(absl::GetFlag(FLAGS_top_logprobs));
  const bool json = absl::GetFlag(FLAGS_json);
  request.set_return_prompt_token_ids(json);
  const int32_t n = absl::GetFlag(FLAGS_n);
  if (n < 1) return convoy::cli::BadUsage(kGenerate, "--n must be at least 1");
  request.set_n(n);

  auto stub = v1::Inference::NewStub(Connect());
  grpc::ClientContext context;
  SetDeadline(&context, 0);
  if (!absl::GetFlag(FLAGS_stream)) {
    v1::InferResponse response;
    const grpc::Status status = stub->Infer(&context, request, &response);
    if (!status.ok()) return RpcFailed(status);
    if (json) {
      std::cout << ResponseJson(response).dump() << "\n";
    } else {
      PrintPlain(response);
    }
    return 0;
  }

  // Streaming: print as messages come; gather the whole response for the end. With several
  // choices, each is printed once it has ended (their messages interleave).
  std::unique_ptr<grpc::ClientReader<v1::InferStreamResponse>> reader =
      stub->InferStream(&context, request);
  v1::InferResponse whole;
  for (int32_t i = 0; n > 1 && i < n; ++i) whole.add_choices()->set_index(i);
  v1::InferStreamResponse message;
  int32_t ended = 0;  // choices
  while (reader->Read(&message)) {
    if (n > 1) {
      if (message.choice_index() < 0 || message.choice_index() >= n) continue;
      v1::Choice* choice = whole.mutable_choices(message.choice_index());
      choice->set_request_id(message.request_id());
      AddStreamed(message, choice);
      if (message.choice_index() == 0) whole.set_request_id(message.request_id());
      if (json && message.token_ids_size() > 0) {
        nlohmann::json j;
        j["choice_index"] = message.choice_index();
        j["first_token_index"] = message.first_token_index();
        j["token_ids"] =
            std::vector<int32_t>(message.token_ids().begin(), message.token_ids().end());
        j["text"] = message.text();
        j["logprobs"] = std::vector<float>(message.logprobs().begin(), message.logprobs().end());
        std::cout << j.dump() << std::endl;
      }
      if (message.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) continue;
      ++ended;
      whole.mutable_usage()->set_prompt_tokens(message.usage().prompt_tokens());
      whole.mutable_usage()->set_cached_prompt_tokens(message.usage().cached_prompt_tokens());
      whole.mutable_usage()->set_completion_tokens(whole.usage().completion_tokens() +
                                                   message.usage().completion_tokens());
      *whole.mutable_prompt_token_ids() = message.prompt_token_ids();
      if (!json) {
        std::cout << "[choice " << choice->index() << "]\n";
        PrintAnswer(*choice);
      }
      continue;
    }
    whole.set_request_id(message.request_id());
    AddStreamed(message, &whole);
    if (json && message.token_ids_size() > 0) {
      nlohmann::json j;
      j["first_token_index"] = message.first_token_index();
      j["token_ids"] = std::vector<int32_t>(message.token_ids().begin(), message.token_ids().end());
      j["text"] = message.text();
      j["logprobs"] = std::vector<float>(message.logprobs().begin(), message.logprobs().end());
      std::cout << j.dump() << std::endl;
    } else if (!json && !message.text().empty()) {
      std::cout << message.text() << std::flush;  // a model with a tokenizer: the text
    } else if (!json && message.token_ids_size() > 0 && whole.text().empty()) {
      std::cout << absl::StrJoin(message.token_ids(), " ") << " " << std::flush;
    }
    if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      ended = 1;
      *whole.mutable_usage() = message.usage();
      *whole.mutable_prompt_token_ids() = message.prompt_token_ids();
    }
  }
  const grpc::Status status = reader->Finish();
  if (ended == n) {
    if (json) {
      std::cout << ResponseJson(whole).dump() << std::endl;
    } else if (n == 1) {
      std::cout << " [" << convoy::FinishReasonText(whole.finish_reason()) << "]" << std::endl;
    }
  } else if (!json && n == 1) {
    std::cout << std::endl;
  }
  if (!status.ok()) return RpcFailed(status);
  return 0;
}

// One conversation, a user line at a time; each answer streams and joins the conversation.
int Chat() {
  v1::InferRequest request;
  if (!SetSampling(kChat, &request)) return convoy::cli::kBadUsage;
  if (Given("system")) AddMessage("system", absl::GetFlag(FLAGS_system), &request);
  auto stub = v1::Inference::NewStub(Connect());
  std::string line;
  while (true) {
    std::cout << "> " << std::flush;
    if (!std::getline(std::cin, line) || line.empty()) break;
    AddMessage("user", line, &request);
    grpc::ClientContext context;
    SetDeadline(&context, 0);
    std::unique_ptr<grpc::ClientReader<v1::InferStreamResponse>> reader =
        stub->InferStream(&context, request);
    std::string answer;
    v1::InferStreamResponse message;
    while (reader->Read(&message)) {
      answer += message.text();
      std::cout << message.text() << std::flush;
    }
    std::cout << "\n";
    if (const grpc::Status status = reader->Finish(); !status.ok()) return RpcFailed(status);
    AddMessage("assistant", answer, &request);
  }
  std::cout << "\n";
  return 0;
}

int Health() {
  auto stub = grpc::health::v1::Health::NewStub(Connect());
  grpc::ClientContext context;
  SetDeadline(&context, 5000);
  HealthCheckRequest request;
  request.set_service(absl::GetFlag(FLAGS_service));
  HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return RpcFailed(status);
  std::cout << HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
  return response.status() == HealthCheckResponse::SERVING ? 0 : kFailed;
}

int Info() {
  auto stub = v1::Inference::NewStub(Connect());
  v1::ServerInfo server;
  {
    grpc::ClientContext context;
    SetDeadline(&context, 5000);
    const grpc::Status status = stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &server);
    if (!status.ok()) return RpcFailed(status);
  }
  v1::ModelInfo model;
  if (server.state() != v1::ServerInfo::LOADING) {
    grpc::ClientContext context;
    SetDeadline(&context, 5000);
    const grpc::Status status = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &model);
    if (!status.ok()) return RpcFailed(status);
  }
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string server_json, model_json;
  if (!google::protobuf::util::MessageToJsonString(server, &server_json, options).ok() ||
      !google::protobuf::util::MessageToJsonString(model, &model_json, options).ok()) {
    std::cerr << "convoy: cannot print the reply as JSON\n";
    return kFailed;
  }
  nlohmann::json j;
  j["server"] = nlohmann::json::parse(server_json);
  j["model"] = nlohmann::json::parse(model_json);
  std::cout << j.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return convoy::cli::BadUsage(kTop, "give a command: generate, health or info");
  const std::string command = argv[1];
  const convoy::cli::CommandLine* spec = nullptr;
  int (*run)() = nullptr;
  if (command == "generate") {
    spec = &kGenerate;
    run = Generate;
  } else if (command == "chat") {
    spec = &kChat;
    run = Chat;
  } else if (command == "health") {
    spec = &kHealth;
    run = Health;
  } else if (command == "info") {
    spec = &kInfo;
    run = Info;
  } else {
    convoy::cli::ParsedFlags parsed;
    if (int exit_code = convoy::cli::Parse(argc, argv, kTop, &parsed); exit_code >= 0) {
      return exit_code;
    }
    return convoy::cli::BadUsage(kTop, absl::StrCat("unknown command '", command, "'"));
  }
  // The command takes argv[0]'s place.
  if (int exit_code = convoy::cli::Parse(argc - 1, argv + 1, *spec, &parsed_flags);
      exit_code >= 0) {
    return exit_code;
  }
  return run();
}
