import Darkroom
import Foundation

/// Writes one JSON object per operation event to stdout (`--events jsonl`).
struct EventsWriter: OperationObserver {
  func receive(_ event: OperationEvent, for operation: OperationInfo) {
    var fields: [(key: String, value: JSONValue)] = [
      ("event", .string(event.name)), ("operation", .string(operation.id.description)),
      ("pipeline", .string(operation.pipelineName)),
    ]
    if let source = operation.source { fields.append(("source", .string(source))) }
    switch event {
    case .stageStarted(let stage):
      fields += stageFields(stage)
    case .stageFinished(let stage, let duration):
      fields += stageFields(stage)
      fields.append(("durationMs", number(duration.milliseconds)))
    case .note(let text):
      fields.append(("note", .string(text)))
    case .cache(let event):
      fields += [
        ("outcome", .string(event.outcome.rawValue)), ("store", .string(event.store)),
        ("index", number(Double(event.stageIndex))),
      ]
      if let detail = event.detail { fields.append(("detail", .string(detail))) }
    case .progress(let received, let expected):
      fields.append(("received", number(Double(received))))
      if let expected { fields.append(("expected", number(Double(expected)))) }
    case .finished(let summary):
      if let path = summary.path { fields.append(("output", .string(path))) }
      if let width = summary.width { fields.append(("width", number(Double(width)))) }
      if let height = summary.height { fields.append(("height", number(Double(height)))) }
      if let format = summary.format { fields.append(("format", .string(format))) }
      if let bytes = summary.bytes { fields.append(("bytes", number(Double(bytes)))) }
      if summary.partial { fields.append(("partial", true)) }
    case .failed(let error):
      var details: [(key: String, value: JSONValue)] = [
        ("code", .string(error.code.rawValue)), ("message", .string(error.message)),
      ]
      if let kind = error.stageKind { details.append(("stage", .string(kind))) }
      if let status = error.httpStatus { details.append(("httpStatus", number(Double(status)))) }
      if let cause = error.cause { details.append(("cause", .string(String(describing: cause)))) }
      fields.append(("error", .object(details)))
    case .started, .willFinish, .cancelled:
      break
    }
    Terminal.out(JSONValue.object(fields).jsonText)
  }

  private func stageFields(_ stage: StageInfo) -> [(key: String, value: JSONValue)] {
    var fields: [(key: String, value: JSONValue)] = [("stage", .string(stage.kind)), ("index", number(Double(stage.index)))]
    if !stage.fusedKinds.isEmpty { fields.append(("fused", .array(stage.fusedKinds.map { .string($0) }))) }
    if stage.joined { fields.append(("joined", .bool(true))) }
    return fields
  }

  private func number(_ value: Double) -> JSONValue {
    let rounded = (value * 1000).rounded() / 1000
    return .number(rounded, text: rounded.rounded() == rounded ? String(Int(rounded)) : String(rounded))
  }
}

extension Duration {
  /// The duration in milliseconds.
  var milliseconds: Double {
    let parts = components
    return Double(parts.seconds) * 1000 + Double(parts.attoseconds) / 1e15
  }
}
