import Foundation

/// The flat JSON form: one object per notification, the keys of Lifecycle.md's JSON Lines events.
extension LoadNotification {
  enum CodingKeys: String, CodingKey, CaseIterable {
    case event, operation, pipeline, source
    case stage, identifier, index, fused, joined, durationMs
    case note, received, expected
    case outcome, store, key, detail, cache
    case output, width, height, format, bytes, partial
    case error, elapsedMs, date
  }

  struct CacheRecord: Codable {
    var outcome: CacheEvent.Outcome
    var store: String
    var index: Int
    var key: String?
    var detail: String?
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(name, forKey: .event)
    try container.encodeIfPresent(operationID, forKey: .operation)
    try container.encode(pipeline, forKey: .pipeline)
    try container.encodeIfPresent(source, forKey: .source)
    if let stage {
      try container.encode(stage.kind, forKey: .stage)
      try container.encode(stage.index, forKey: .index)
      if !stage.fusedKinds.isEmpty { try container.encode(stage.fusedKinds, forKey: .fused) }
      if stage.joined { try container.encode(true, forKey: .joined) }
    }
    try container.encodeIfPresent(stageMilliseconds.map(Self.rounded), forKey: .durationMs)
    try container.encodeIfPresent(note, forKey: .note)
    try container.encodeIfPresent(received, forKey: .received)
    try container.encodeIfPresent(expected, forKey: .expected)
    if name == "cache", stage == nil, cache.count == 1, let event = cache.first {
      try container.encode(event.outcome, forKey: .outcome)
      try container.encode(event.store, forKey: .store)
      try container.encode(event.stageIndex, forKey: .index)
      try container.encodeIfPresent(event.key, forKey: .key)
      try container.encodeIfPresent(event.detail, forKey: .detail)
    } else if !cache.isEmpty {
      try container.encode(
        cache.map { CacheRecord(outcome: $0.outcome, store: $0.store, index: $0.stageIndex, key: $0.key, detail: $0.detail) },
        forKey: .cache)
    }
    if let image {
      try container.encodeIfPresent(image.path, forKey: .output)
      try container.encodeIfPresent(image.width, forKey: .width)
      try container.encodeIfPresent(image.height, forKey: .height)
      try container.encodeIfPresent(image.format, forKey: .format)
      try container.encodeIfPresent(image.bytes, forKey: .bytes)
      if image.partial { try container.encode(true, forKey: .partial) }
    }
    try container.encodeIfPresent(error, forKey: .error)
    try container.encodeIfPresent(milliseconds.map(Self.rounded), forKey: .elapsedMs)
    try container.encode(date.formatted(.iso8601), forKey: .date)
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    let name = try container.decode(String.self, forKey: .event)
    let stageKind = try container.decodeIfPresent(String.self, forKey: .stage)
    let index = try container.decodeIfPresent(Int.self, forKey: .index)
    var cache = try container.decodeIfPresent([CacheRecord].self, forKey: .cache) ?? []
    if let outcome = try container.decodeIfPresent(CacheEvent.Outcome.self, forKey: .outcome) {
      let store = try container.decode(String.self, forKey: .store)
      let detail = try container.decodeIfPresent(String.self, forKey: .detail)
      let key = try container.decodeIfPresent(String.self, forKey: .key)
      cache = [CacheRecord(outcome: outcome, store: store, index: index ?? 0, key: key, detail: detail)]
    }
    let width = try container.decodeIfPresent(Int.self, forKey: .width)
    let height = try container.decodeIfPresent(Int.self, forKey: .height)
    let format = try container.decodeIfPresent(String.self, forKey: .format)
    let bytes = try container.decodeIfPresent(Int.self, forKey: .bytes)
    let path = try container.decodeIfPresent(String.self, forKey: .output)
    let partial = try container.decodeIfPresent(Bool.self, forKey: .partial) ?? false
    let hasImage = width != nil || height != nil || format != nil || bytes != nil || path != nil
    let dateText = try container.decode(String.self, forKey: .date)
    guard let date = try? Date(dateText, strategy: .iso8601) else {
      throw DecodingError.dataCorruptedError(forKey: .date, in: container, debugDescription: "not an ISO 8601 date: \(dateText)")
    }
    self.init(
      name: name, operationID: try container.decodeIfPresent(String.self, forKey: .operation),
      pipeline: try container.decode(String.self, forKey: .pipeline),
      source: try container.decodeIfPresent(String.self, forKey: .source),
      image: hasImage
        ? Image(width: width, height: height, format: format, bytes: bytes, path: path, partial: partial) : nil,
      cache: cache.map { CacheEvent($0.outcome, store: $0.store, stageIndex: $0.index, key: $0.key, detail: $0.detail) },
      error: try container.decodeIfPresent(Failure.self, forKey: .error),
      milliseconds: try container.decodeIfPresent(Double.self, forKey: .elapsedMs),
      stage: stageKind.map { kind in
        StageInfo(
          index: index ?? 0, kind: kind, identifier: "",
          fusedKinds: (try? container.decodeIfPresent([String].self, forKey: .fused)) ?? [],
          joined: (try? container.decodeIfPresent(Bool.self, forKey: .joined)) ?? false)
      },
      stageMilliseconds: try container.decodeIfPresent(Double.self, forKey: .durationMs),
      note: try container.decodeIfPresent(String.self, forKey: .note),
      received: try container.decodeIfPresent(Int.self, forKey: .received),
      expected: try container.decodeIfPresent(Int.self, forKey: .expected), date: date)
  }

  /// The JSON line with its keys in the documented order (`event` first, `date` last).
  public func jsonLine() throws -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.withoutEscapingSlashes]
    let encoded = try encoder.encode(self)
    guard case .object(let members) = try JSONParser.parse(String(decoding: encoded, as: UTF8.self)) else { return encoded }
    let order = Dictionary(uniqueKeysWithValues: CodingKeys.allCases.enumerated().map { ($1.rawValue, $0) })
    let sorted = members.sorted { (order[$0.key] ?? .max) < (order[$1.key] ?? .max) }
    return Data(JSONValue.object(sorted).jsonText.utf8)
  }

  private static func rounded(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
}
