import Darkroom
import Foundation
import Testing

@Suite("Option bounds")
struct OptionBoundsTests {
  /// Every number option of every built-in stage, nested ones included, as "kind.option".
  static func numberOptions() -> [(name: String, min: Double?, max: Double?)] {
    func walk(_ specs: [OptionSpec], prefix: String) -> [(name: String, min: Double?, max: Double?)] {
      specs.flatMap { spec -> [(name: String, min: Double?, max: Double?)] in
        switch spec.type {
        case .number(let min, let max): return [(prefix + spec.name, min, max)]
        case .object(let nested): return walk(nested, prefix: prefix + spec.name + ".")
        default: return []
        }
      }
    }
    return Darkroom.standardRegistry.allEntries.flatMap { walk($0.specs, prefix: $0.kind + ".") }
  }

  @Test("every number option has a finite range, so no value from a file can overflow a conversion")
  func numbersAreBounded() {
    // Found by fuzzing: "maxAge": 10^100 and a crop rect of 1e300 trapped converting to Int.
    let options = Self.numberOptions()
    #expect(options.count >= 8)
    for option in options {
      #expect(option.min != nil && option.max != nil, "\(option.name) has no bound")
      if let min = option.min, let max = option.max { #expect(abs(min) < 1e12 && abs(max) < 1e12, "\(option.name)") }
    }
  }

  @Test("huge numbers in a pipeline file are refused with the range, never a crash")
  func hugeNumbersRefused() throws {
    let text = """
      {"version": 1, "name": "huge", "stages": [
        {"stage": "fetch"}, {"stage": "decode"},
        {"stage": "crop", "unit": "pixels", "rect": {"x": 1e300, "y": 0, "width": 10, "height": 10}},
        {"stage": "encode", "format": "png"},
        {"stage": "cache", "store": "memory", "maxAge": 1e100}
      ]}
      """
    #expect {
      _ = try PipelineDefinition.loadSet(json: text, registry: Darkroom.standardRegistry)
    } throws: { error in
      let message = (error as? PipelineError)?.message ?? ""
      return message.contains("stages[2].rect.x: expected a number from 0 to 2147483647, got 1e300")
        && message.contains("stages[4].maxAge: expected a number from -3153600000 to 3153600000")
    }
  }
}
