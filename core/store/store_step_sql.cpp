// Runs a transactional step's parameterized SQL inside the checkpoint's
// transaction, after the one guard on step SQL (step_sql_guard.hpp).
#include "step_sql_guard.hpp"
#include "store_internal.hpp"

namespace cairn::store {

namespace {

Json DecodeValue(const pqxx::field& field) {
  if (field.is_null()) return nullptr;
  switch (field.type()) {
    case 16:  // bool
      return std::string_view(field.c_str()) == "t";
    case 20:  // int8
    case 21:  // int2
    case 23:  // int4
      return field.as<int64_t>();
    case 700:  // float4
    case 701:  // float8
      return field.as<double>();
    case 114:   // json
    case 3802:  // jsonb
      return Json::parse(field.c_str(), field.c_str() + field.size());
    default:
      return std::string(field.c_str(), field.size());
  }
}

}  // namespace

Json ExecuteStepSql(Tx& tx, const std::string& sql, const Json& params) {
  if (!params.is_array() && !params.is_null()) {
    throw InvalidArgumentError("step SQL parameters must be a JSON array");
  }
  if (std::optional<std::string> refusal = StepSqlRefusal(sql)) {
    throw InvalidArgumentError("step SQL refused: " + *refusal +
                               " (statement: " + sql.substr(0, 80) + ")");
  }
  std::vector<std::optional<std::string>> values;
  if (params.is_array()) {
    for (const auto& p : params) {
      if (p.is_null()) {
        values.emplace_back(std::nullopt);
      } else if (p.is_string()) {
        values.emplace_back(p.get<std::string>());
      } else {
        values.emplace_back(p.dump());
      }
    }
  }
  pqxx::result result;
  try {
    result = Internal(tx).work.exec_params(sql, pqxx::prepare::make_dynamic_params(values));
  } catch (...) {
    RethrowTranslated("step sql");
  }
  Json rows = Json::array();
  for (const auto& row : result) {
    Json object = Json::object();
    for (const auto& field : row) object[field.name()] = DecodeValue(field);
    rows.push_back(std::move(object));
  }
  return rows;
}

void ApplyStepTransactionSettings(Tx& tx, std::chrono::milliseconds timeout) {
  Internal(tx).Exec("step_transaction_settings", std::to_string(timeout.count()) + "ms");
}

}  // namespace cairn::store
