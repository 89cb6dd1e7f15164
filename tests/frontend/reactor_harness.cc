#include "reactor_harness.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace convoy::testing {

absl::Status FakeEngine::Submit(Request request, EventCallback on_event) {
  std::function<void(RequestId)> hook;
  {
    absl::MutexLock lock(&mu_);
    hook = submit_hook_;
  }
  if (hook) hook(request.id);
  absl::MutexLock lock(&mu_);
  submitted_.push_back(request.id);
  callbacks_[request.id] = std::move(on_event);
  return absl::OkStatus();
}

void FakeEngine::Cancel(RequestId id) {
  absl::MutexLock lock(&mu_);
  if (std::find(submitted_.begin(), submitted_.end(), id) == submitted_.end()) return;
  cancelled_.push_back(id);
}

void FakeEngine::SetSubmitHook(std::function<void(RequestId)> hook) {
  absl::MutexLock lock(&mu_);
  submit_hook_ = std::move(hook);
}

std::vector<RequestId> FakeEngine::AwaitSubmitted(size_t n) {
  absl::MutexLock lock(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return submitted_.size() >= n; };
  mu_.AwaitWithTimeout(absl::Condition(&enough), kLiveness);
  return submitted_;
}

bool FakeEngine::AwaitCancelled(RequestId id) {
  absl::MutexLock lock(&mu_);
  auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::find(cancelled_.begin(), cancelled_.end(), id) != cancelled_.end();
  };
  return mu_.AwaitWithTimeout(absl::Condition(&seen), kLiveness);
}

std::vector<RequestId> FakeEngine::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

void FakeEngine::Token(RequestId id, int64_t index) {
  Event event;
  event.kind = Event::Kind::kToken;
  event.request_id = id;
  event.token = static_cast<int32_t>(10 + index);
  event.token_index = index;
  Send(event);
}

void FakeEngine::Final(RequestId id, Outcome outcome, absl::Status status, int64_t generated) {
  Event event;
  event.kind = Event::Kind::kFinal;
  event.request_id = id;
  event.outcome = outcome;
  event.status = std::move(status);
  event.num_generated = generated;
  event.queue_time = absl::Milliseconds(1);
  Send(event);
}

void FakeEngine::Send(const Event& event) {
  EventCallback callback;
  {
    absl::MutexLock lock(&mu_);
    auto it = callbacks_.find(event.request_id);
    ASSERT_NE(it, callbacks_.end()) << "an event after the final one";
    callback = it->second;
    if (event.kind == Event::Kind::kFinal) callbacks_.erase(it);
  }
  callback(event);
}

void ReactorFixture::SetUp() {
  service_ = std::make_unique<InferenceService>("test");
  kserve_ = std::make_unique<KServeService>(service_->hub(), "test");
  ServingContext context;
  context.engine = &engine_;
  context.limits.model_name = "fake";
  context.limits.vocab_size = 100;
  context.limits.max_context_length = 256;
  context.limits.slow_client_timeout = absl::Seconds(60);
  service_->Start(std::move(context));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service_.get());
  builder.RegisterService(kserve_.get());
  server_ = builder.BuildAndStart();
  ASSERT_NE(server_, nullptr);
  channel_ =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  // Connected before any test's call: a call on an unconnected channel fails at the first failed
  // attempt, and Debian's gRPC 1.51 can report a connect in progress as failed (grpc/grpc#35064);
  // connecting here tries again until it is up.
  ASSERT_TRUE(channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + kLiveness)));
}

void ReactorFixture::TearDown() {
  // Nothing may be left open by any test: every call ended, every session closed.
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness)) << service_->open_calls() << " calls open";
  server_->Shutdown();
  server_.reset();
  kserve_.reset();
  service_.reset();
}

std::string UnparseableBytes() { return std::string({0x08, static_cast<char>(0xff)}); }

namespace {

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromByteBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

}  // namespace

grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                          const std::string& request, std::string* reply) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  const grpc::ByteBuffer request_bytes = ToByteBuffer(request);
  grpc::ByteBuffer reply_bytes;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request_bytes, &reply_bytes,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (reply != nullptr && status.ok()) *reply = FromByteBuffer(reply_bytes);
  return status;
}

RawStream::RawStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& method) {
  context_.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  grpc::GenericStub stub(channel);
  call_ = stub.PrepareCall(&context_, method, &queue_);
  void* tag = reinterpret_cast<void*>(next_tag_++);
  call_->StartCall(tag);
  EXPECT_TRUE(Await(tag)) << method << " did not start";
}

RawStream::~RawStream() {
  context_.TryCancel();  // ends a call the test left open
  queue_.Shutdown();
  void* tag;
  bool ok;
  while (queue_.Next(&tag, &ok)) {
  }
}

bool RawStream::Write(const std::string& bytes) {
  void* tag = reinterpret_cast<void*>(next_tag_++);
  call_->Write(ToByteBuffer(bytes), tag);
  return Await(tag);
}

bool RawStream::Read(std::string* bytes) {
  grpc::ByteBuffer buffer;
  void* tag = reinterpret_cast<void*>(next_tag_++);
  call_->Read(&buffer, tag);
  if (!Await(tag)) return false;
  *bytes = FromByteBuffer(buffer);
  return true;
}

bool RawStream::WritesDone() {
  void* tag = reinterpret_cast<void*>(next_tag_++);
  call_->WritesDone(tag);
  return Await(tag);
}

grpc::Status RawStream::Finish() {
  grpc::Status status;
  void* tag = reinterpret_cast<void*>(next_tag_++);
  call_->Finish(&status, tag);
  EXPECT_TRUE(Await(tag));
  return status;
}

bool RawStream::Await(void* tag) {
  void* got = nullptr;
  bool ok = false;
  // The call's deadline bounds the wait: past it, the operation fails.
  EXPECT_TRUE(queue_.Next(&got, &ok));
  EXPECT_EQ(got, tag);
  return ok;
}

inference::ModelInferRequest KServeIdsRequest(const std::string& id, int32_t max_tokens) {
  inference::ModelInferRequest request;
  request.set_model_name("fake");
  request.set_id(id);
  inference::ModelInferRequest::InferInputTensor* ids = request.add_inputs();
  ids->set_name("input_ids");
  ids->set_datatype("INT32");
  ids->add_shape(3);
  for (int32_t token : {1, 5, 9}) ids->mutable_contents()->add_int_contents(token);
  inference::ModelInferRequest::InferInputTensor* max = request.add_inputs();
  max->set_name("max_tokens");
  max->set_datatype("INT32");
  max->add_shape(1);
  max->mutable_contents()->add_int_contents(max_tokens);
  return request;
}

std::vector<int32_t> KServeOutputIds(const inference::ModelInferResponse& response) {
  for (const auto& output : response.outputs()) {
    if (output.name() == "output_ids") {
      return std::vector<int32_t>(output.contents().int_contents().begin(),
                                  output.contents().int_contents().end());
    }
  }
  return {};
}

bool KServeIsFinal(const inference::ModelInferResponse& response) {
  auto it = response.parameters().find("triton_final_response");
  return it != response.parameters().end() && it->second.bool_param();
}

}  // namespace convoy::testing
