import Darkroom
import Foundation
import Testing

/// A user's own `Codable` type, written by hand in a file that imports Darkroom: the names
/// `Decoder` and `Encoder` must still mean Swift's protocols here (no `Swift.` in front).
private struct Crop: Codable, Equatable {
  var label: String
  var width: Int
  var scale: Double
  var tags: [String]

  private enum Keys: String, CodingKey {
    case label, width, scale, tags
  }

  init(label: String, width: Int, scale: Double, tags: [String]) {
    self.label = label
    self.width = width
    self.scale = scale
    self.tags = tags
  }

  init(from decoder: Decoder) throws {
    let container = try decoder.container(keyedBy: Keys.self)
    label = try container.decode(String.self, forKey: .label)
    width = try container.decode(Int.self, forKey: .width)
    scale = try container.decode(Double.self, forKey: .scale)
    tags = try container.decodeIfPresent([String].self, forKey: .tags) ?? []
  }

  func encode(to encoder: Encoder) throws {
    var container = encoder.container(keyedBy: Keys.self)
    try container.encode(label, forKey: .label)
    try container.encode(width, forKey: .width)
    try container.encode(scale, forKey: .scale)
    if !tags.isEmpty { try container.encode(tags, forKey: .tags) }
  }
}

@Suite("A file that imports Darkroom")
struct HandWrittenCodableTests {
  @Test("can declare its own Codable type with init(from: Decoder) and encode(to: Encoder)")
  func roundTrip() throws {
    let crop = Crop(label: "avatar", width: 256, scale: 0.5, tags: ["square", "face"])
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    let data = try encoder.encode(crop)
    #expect(String(decoding: data, as: UTF8.self) == #"{"label":"avatar","scale":0.5,"tags":["square","face"],"width":256}"#)
    let decoded = try JSONDecoder().decode(Crop.self, from: data)
    #expect(decoded == crop)
    #expect(decoded.label == "avatar")
    #expect(decoded.width == 256)
    #expect(decoded.scale == 0.5)
    #expect(decoded.tags == ["square", "face"])

    let untagged = try JSONDecoder().decode(Crop.self, from: Data(#"{"label":"hero","width":1200,"scale":2}"#.utf8))
    #expect(untagged == Crop(label: "hero", width: 1200, scale: 2, tags: []))
    #expect(String(decoding: try encoder.encode(untagged), as: UTF8.self) == #"{"label":"hero","scale":2,"width":1200}"#)
  }
}
