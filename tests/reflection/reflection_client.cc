#include "tests/reflection/reflection_client.h"

#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/byte_buffer.h"
#include "tests/reflection/reflection.grpc.pb.h"

namespace pstrain {
namespace {

using grpc::reflection::v1alpha::ServerReflection;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;

constexpr char kHealthService[] = "grpc.health.v1.Health";

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::microseconds(absl::ToInt64Microseconds(timeout)));
}

absl::Status FromGrpc(const grpc::Status& status, const std::string& address,
                      const std::string& what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(address, ": ", what, ": ", status.error_message()));
}

// One request on a reflection stream, one answer.
absl::StatusOr<ServerReflectionResponse> Ask(const std::string& address,
                                             const ServerReflectionRequest& request,
                                             absl::Duration timeout) {
  auto stub = ServerReflection::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  auto stream = stub->ServerReflectionInfo(&context);
  ServerReflectionResponse response;
  const bool exchanged = stream->Write(request) && stream->Read(&response);
  stream->WritesDone();
  const grpc::Status finished = stream->Finish();
  if (!exchanged || !finished.ok()) return FromGrpc(finished, address, "server reflection");
  if (response.has_error_response()) {
    return absl::Status(static_cast<absl::StatusCode>(response.error_response().error_code()),
                        absl::StrCat(address, ": server reflection: ",
                                     response.error_response().error_message()));
  }
  return response;
}

// Adds every FileDescriptorProto of `files` to `pool`, dependencies first whatever their
// order. Errors: INVALID_ARGUMENT a file that cannot be parsed or built.
absl::Status BuildFiles(const ServerReflectionResponse& files,
                        google::protobuf::DescriptorPool* pool) {
  std::vector<google::protobuf::FileDescriptorProto> pending;
  for (const std::string& bytes : files.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    if (!file.ParseFromString(bytes)) {
      return absl::InvalidArgumentError("reflection returned a malformed FileDescriptorProto");
    }
    pending.push_back(std::move(file));
  }
  while (!pending.empty()) {
    bool progress = false;
    for (auto it = pending.begin(); it != pending.end();) {
      bool ready = true;
      for (const std::string& dependency : it->dependency()) {
        ready &= pool->FindFileByName(dependency) != nullptr;
      }
      if (!ready) {
        ++it;
        continue;
      }
      if (pool->BuildFile(*it) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("cannot build ", it->name()));
      }
      it = pending.erase(it);
      progress = true;
    }
    if (!progress) {
      return absl::InvalidArgumentError(absl::StrCat(
          pending.front().name(), " imports a file reflection did not return"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListServicesByReflection(const std::string& address,
                                                                  absl::Duration timeout) {
  ServerReflectionRequest request;
  request.set_list_services("");
  absl::StatusOr<ServerReflectionResponse> response = Ask(address, request, timeout);
  if (!response.ok()) return response.status();
  std::vector<std::string> names;
  for (const auto& service : response->list_services_response().service()) {
    names.push_back(service.name());
  }
  return names;
}

absl::StatusOr<std::string> HealthCheckByReflection(const std::string& address,
                                                    absl::Duration timeout) {
  ServerReflectionRequest request;
  request.set_file_containing_symbol(kHealthService);
  absl::StatusOr<ServerReflectionResponse> files = Ask(address, request, timeout);
  if (!files.ok()) return files.status();
  google::protobuf::DescriptorPool pool;
  if (absl::Status built = BuildFiles(*files, &pool); !built.ok()) return built;
  const google::protobuf::MethodDescriptor* check =
      pool.FindMethodByName(absl::StrCat(kHealthService, ".Check"));
  if (check == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(address, ": reflection does not describe ", kHealthService, ".Check"));
  }
  google::protobuf::DynamicMessageFactory factory(&pool);
  std::unique_ptr<google::protobuf::Message> health_request(
      factory.GetPrototype(check->input_type())->New());
  const google::protobuf::FieldDescriptor* service =
      check->input_type()->FindFieldByName("service");
  if (service == nullptr) {
    return absl::NotFoundError("the health request has no field \"service\"");
  }
  health_request->GetReflection()->SetString(health_request.get(), service, "");
  std::string request_bytes;
  health_request->SerializeToString(&request_bytes);

  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::GenericStub generic(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call = generic.PrepareUnaryCall(
      &context, absl::StrCat("/", kHealthService, "/Check"), request_buffer, &queue);
  call->StartCall();
  grpc::ByteBuffer reply_buffer;
  grpc::Status status;
  call->Finish(&reply_buffer, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!queue.Next(&tag, &ok) || !ok) {
    return absl::UnavailableError(absl::StrCat(address, ": Health/Check did not complete"));
  }
  if (!status.ok()) return FromGrpc(status, address, "Health/Check");
  std::vector<grpc::Slice> slices;
  if (!reply_buffer.Dump(&slices).ok()) {
    return absl::InternalError("cannot read the Health/Check reply");
  }
  std::string reply_bytes;
  for (const grpc::Slice& s : slices) {
    reply_bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  std::unique_ptr<google::protobuf::Message> reply(
      factory.GetPrototype(check->output_type())->New());
  if (!reply->ParseFromString(reply_bytes)) {
    return absl::InternalError("the Health/Check reply does not parse as its declared type");
  }
  const google::protobuf::FieldDescriptor* status_field =
      check->output_type()->FindFieldByName("status");
  if (status_field == nullptr || status_field->enum_type() == nullptr) {
    return absl::NotFoundError("the health reply has no enum field \"status\"");
  }
  return reply->GetReflection()->GetEnum(*reply, status_field)->name();
}

}  // namespace pstrain
