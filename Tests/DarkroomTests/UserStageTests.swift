import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

/// A user's own stage with its own value types: counts the bytes of a source.
struct ByteCount: PipelineValue {
  static let valueDescription = "a byte count"
  var count: Int
  var label: String
}

struct CountBytes: Stage {
  static let kind = "countBytes"
  var label: String
  var identifier: String { "countBytes(\(label))" }
  func process(_ input: FetchedData, context: StageContext) async throws -> ByteCount {
    ByteCount(count: input.bytes.count, label: label)
  }
}

struct CountBytesOptions: StageOptions {
  var label: String
  static let specs = [OptionSpec("label", .string, default: "bytes", "A label carried into the result.")]
}

@Suite("User stages")
struct UserStageTests {
  func tempFile(_ bytes: [UInt8]) throws -> String {
    let path = NSTemporaryDirectory() + "darkroom-user-\(UUID().uuidString).bin"
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
  }

  @Test("a registered user stage runs from JSON, validated like the built-in ones")
  func registeredStageRunsFromJSON() async throws {
    var registry = Darkroom.standardRegistry
    registry.register("countBytes", summary: "Counts bytes.", options: CountBytesOptions.self) { options, _ in
      CountBytes(label: options.label)
    }
    let path = try tempFile([1, 2, 3, 4, 5])
    defer { try? FileManager.default.removeItem(atPath: path) }
    let graph = try PipelineDefinition.load(
      json: #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "countBytes", "label": "five"}]}"#, registry: registry)
    let pipeline = try Pipeline<ImageSource, ByteCount>(graph)
    let result = try await pipeline.process(ImageSource(path: path))
    #expect(result.count == 5)
    #expect(result.label == "five")

    do {
      _ = try PipelineDefinition.load(
        json: #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "countBytes", "lable": "x"}]}"#, registry: registry)
      Issue.record("accepted a misspelt option")
    } catch {
      #expect(error.message == #"stages[1].lable: unknown option "lable" for "countBytes"; did you mean "label"?"#)
    }
    do {
      _ = try PipelineDefinition.load(
        json: #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "countBytes"}, {"stage": "decode"}]}"#, registry: registry
      )
      Issue.record("accepted a byte count into decode")
    } catch {
      #expect(
        error.message
          == #"stages[2] "decode" needs bytes but stages[1] "countBytes" produces a byte count: reorder the stages or add one that turns one into the other"#
      )
    }
  }

  @Test("the same user stage composes in code with the builder")
  func userStageInBuilder() async throws {
    let path = try tempFile(Array(repeating: 7, count: 42))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let pipeline = Pipeline(name: "count") {
      Fetcher()
      CountBytes(label: "code")
    }
    #expect(try await pipeline.process(ImageSource(path: path)).count == 42)
    let appended = Pipeline(name: "count", Fetcher()).appending(CountBytes(label: "imperative"))
    #expect(appended.graph.stages.map(\.kind) == pipeline.graph.stages.map(\.kind))
    #expect(try await appended.process(ImageSource(path: path)).label == "imperative")
  }
}

/// A pass-through stage: records the description of each value's type and hands it on.
struct Tap<Value: Sendable>: Stage {
  static var kind: String { "tap" }
  let seen: Protected<[String]>
  var identifier: String { "tap" }
  func process(_ input: Value, context: StageContext) async throws -> Value {
    seen.withLock { $0.append(valueDescription(of: Value.self)) }
    return input
  }
}

struct TapFactory: PassThroughStageFactory {
  let seen: Protected<[String]>
  func makeStage<Value: Sendable>(for type: Value.Type) throws -> AnyStage { AnyStage(Tap<Value>(seen: seen)) }
}

@Suite("Pass-through kinds")
struct PassThroughTests {
  @Test("a pass-through kind fits anywhere and carries the type of the stage before it")
  func fitsAnywhere() async throws {
    let seen = Protected<[String]>([])
    var registry = Darkroom.standardRegistry
    registry.registerPassThrough("tap", summary: "Records values.", options: NoOptions.self) { _, _ in TapFactory(seen: seen) }
    let path = NSTemporaryDirectory() + "darkroom-tap-\(UUID().uuidString).png"
    try TestImages.encoded(.png(), width: 40, height: 20).data.write(to: URL(fileURLWithPath: path))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let graph = try PipelineDefinition.load(
      json: #"""
        {"version": 1, "stages": [{"stage": "tap"}, {"stage": "fetch"}, {"stage": "tap"}, {"stage": "decode"}, {"stage": "tap"},
          {"stage": "encode", "format": "png"}, {"stage": "tap"}]}
        """#, registry: registry)
    let output = try await PipelineExecutor().start(graph, input: ImageSource(path: path), as: EncodedImage.self).value
    #expect(output.width == 40)
    #expect(seen.value == ["a source", "bytes", "an image", "an encoded image"])
    // Mismatches around a pass-through stage are still found, naming it.
    do {
      _ = try PipelineDefinition.load(
        json: #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "tap"}, {"stage": "resize", "width": 9}]}"#,
        registry: registry)
      Issue.record("accepted bytes into resize")
    } catch {
      #expect(
        error.message.hasPrefix(#"stages[2] "resize" needs an image but stages[1] "tap" produces bytes"#), "\(error.message)")
    }
    #expect(
      StageCatalog.text(for: registry).contains("tap: Records values.\n  any value (passed through unchanged) -> any value"))
  }
}
