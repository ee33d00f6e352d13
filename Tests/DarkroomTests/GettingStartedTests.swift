import Darkroom
import Foundation
import Testing

// The code of the getting-started articles in Sources/Darkroom/Darkroom.docc, as the articles
// show it: `ArticleCodeTests` checks that every Swift and JSON block of those articles appears
// here (or in Examples/hummingbird-thumbnails) line for line, and the tests below run it.

// MARK: - PipelinesInCode.md

/// Fits an image into 300×300 and encodes it as JPEG.
let thumbnail = Pipeline(name: "thumbnail") {
  Fetcher()
  ImageDecoder()
  Resizer(width: 300, height: 300, mode: .fit)
  ImageEncoder(.jpeg(quality: 80))
}

/// Makes a thumbnail of the image at `path` and writes it beside `output` with the extension of
/// its format.
func saveThumbnail(of path: String, to output: String) async throws -> String {
  try Darkroom.bootstrap()
  let operation = thumbnail.run(ImageSource(path))
  let image = try await operation.value  // an EncodedImage
  let file = output + "." + image.format.fileExtension
  try image.bytes.data.write(to: URL(fileURLWithPath: file))
  return file
}

/// The stages a thumbnail ran, each with the time it took.
func stageTimes(for path: String) async throws(PipelineError) -> [String] {
  let operation = thumbnail.run(ImageSource(path))
  var times: [String] = []
  for await event in operation.events {
    switch event {
    case .stageFinished(let stage, let duration):
      times.append("\(stage.kind): \(duration)")
    case .failed(let error):
      throw error
    default:
      break
    }
  }
  return times
}

/// What became of a thumbnail, in a sentence.
func outcome(for path: String) async -> String {
  do {
    let image = try await thumbnail.run(ImageSource(path)).value
    return "\(image.width)×\(image.height) \(image.format)"
  } catch let error where error.code == .notFound {
    return "there is no file at \(path)"
  } catch {
    return "\(error.code): \(error.message)"
  }
}

/// A thumbnail with time limits: 10 s for the whole run, 2 s for reading the file.
func quickThumbnail(of path: String) async throws(PipelineError) -> EncodedImage {
  var options = RunOptions(timeout: .seconds(10))
  options.stageTimeouts = ["fetch": .seconds(2)]
  return try await thumbnail.run(ImageSource(path), options: options).value
}

/// The same pipeline, one stage at a time.
let square = Pipeline(name: "square", Fetcher())
  .appending(ImageDecoder())
  .appending(Resizer(width: 128, height: 128, mode: .fill))
  .appending(ImageEncoder(.png()))

// MARK: - JSONPipelineWithYourOwnStage.md

extension PipelineError.Code {
  /// An encoded image came out bigger than its byte budget.
  static let overBudget = Self("overBudget")
}

/// Passes an encoded image on when it has at most `maxBytes` bytes, and fails otherwise.
struct ByteBudget: Stage {
  static let kind = "byteBudget"
  var maxBytes: Int
  var identifier: String { "byteBudget(\(maxBytes))" }

  func process(_ image: EncodedImage, context: StageContext) async throws -> EncodedImage {
    guard image.bytes.count <= maxBytes else {
      throw PipelineError(.overBudget, "the \(image.format) image has \(image.bytes.count) bytes, over the budget of \(maxBytes)")
    }
    return image
  }
}

/// The options of a `byteBudget` stage in a pipeline file.
struct ByteBudgetOptions: StageOptions {
  var maxBytes: Int
  static let specs = [
    OptionSpec("maxBytes", .integer(min: 1), required: true, "The most bytes the encoded image may have.")
  ]
}

/// The built-in stage kinds and `byteBudget`.
func registryWithBudget() -> StageRegistry {
  var registry = Darkroom.standardRegistry
  registry.register(
    "byteBudget", summary: "Fails when the encoded image has more than maxBytes bytes.", options: ByteBudgetOptions.self
  ) { options, _ in
    ByteBudget(maxBytes: options.maxBytes)
  }
  return registry
}

/// The contents of `thumbnail-budget.json`.
let budgetPipelineJSON = """
  {
    "version": 1,
    "name": "thumbnail-budget",
    "stages": [
      { "stage": "fetch" },
      { "stage": "decode" },
      { "stage": "resize", "width": 300, "height": 300 },
      { "stage": "encode", "format": "webp", "quality": 75 },
      { "stage": "byteBudget", "maxBytes": 20000 }
    ]
  }
  """

/// Loads `pipelineFile` with the `byteBudget` kind registered, and runs it on the image at `path`.
func budgetedThumbnail(of path: String, pipelineFile: String) async throws(PipelineError) -> EncodedImage {
  let graph = try PipelineDefinition.load(contentsOf: pipelineFile, registry: registryWithBudget())
  let pipeline = try Pipeline<ImageSource, EncodedImage>(graph)
  return try await pipeline.run(ImageSource(path)).value
}

/// Every problem of a pipeline definition, one line each.
func problems(in json: String) -> [String] {
  do {
    _ = try PipelineDefinition.load(json: json, registry: registryWithBudget())
    return []
  } catch {
    return error.issues.map { "\($0.code): \($0)" }
  }
}

// MARK: - Tests

@Suite("Getting started")
struct GettingStartedTests {
  let images = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Examples/images").path

  func temporaryFolder() throws -> String {
    let folder = NSTemporaryDirectory() + "darkroom-getting-started-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    return folder
  }

  @Test("a pipeline in code: run it, read its value, its events and its errors")
  func pipelineInCode() async throws {
    let folder = try temporaryFolder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let file = try await saveThumbnail(of: images + "/dunes.jpg", to: folder + "/dunes-300")
    #expect(file == folder + "/dunes-300.jpg")
    let written = try Data(contentsOf: URL(fileURLWithPath: file))
    #expect(ImageFormat.sniff(Array(written.prefix(16))) == .jpeg)

    let times = try await stageTimes(for: images + "/dunes.jpg")
    #expect(times.map { String($0.prefix { $0 != ":" }) } == ["fetch", "decode+resize", "encode"])
    await #expect(throws: PipelineError.self) { try await stageTimes(for: folder + "/missing.jpg") }

    #expect(await outcome(for: images + "/dunes.jpg") == "300×200 JPEG")
    #expect(await outcome(for: folder + "/missing.jpg") == "there is no file at \(folder)/missing.jpg")
    try "not an image".write(toFile: folder + "/notes.jpg", atomically: true, encoding: .utf8)
    #expect(await outcome(for: folder + "/notes.jpg").hasPrefix("unsupportedFormat: "))

    #expect(try await quickThumbnail(of: images + "/rings.png").width <= 300)
    let squared = try await square.run(ImageSource(images + "/dunes.jpg")).value
    #expect(squared.width == 128 && squared.height == 128 && squared.format == .png)
  }

  @Test("a JSON pipeline with a stage of one's own: loaded, run, and its mistakes reported")
  func jsonPipelineWithOwnStage() async throws {
    let folder = try temporaryFolder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let pipelineFile = folder + "/thumbnail-budget.json"
    try budgetPipelineJSON.write(toFile: pipelineFile, atomically: true, encoding: .utf8)
    let image = try await budgetedThumbnail(of: images + "/dunes.jpg", pipelineFile: pipelineFile)
    #expect(image.format == .webp && image.width == 300)
    #expect(image.bytes.count <= 20000)

    let tight = budgetPipelineJSON.replacingOccurrences(of: "20000", with: "100")
    try tight.write(toFile: pipelineFile, atomically: true, encoding: .utf8)
    do {
      _ = try await budgetedThumbnail(of: images + "/dunes.jpg", pipelineFile: pipelineFile)
      Issue.record("a thumbnail over its budget was delivered")
    } catch {
      #expect(error.code == .overBudget)
      #expect(error.stageKind == "byteBudget")
      #expect(error.message.hasPrefix("the WebP image has "))
    }

    let broken = #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decod"}, {"stage": "byteBudget", "maxBytes": 0}]}"#
    #expect(
      problems(in: broken) == [
        #"unknownStage: stages[1].stage: unknown stage kind "decod"; did you mean "decode"?"#,
        "invalidDefinition: stages[2].maxBytes: expected a positive integer, got 0",
      ])
    let misplaced =
      #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "byteBudget", "maxBytes": 9}]}"#
    #expect(
      problems(in: misplaced).first?.hasPrefix(
        #"typeMismatch: stages[2] "byteBudget" needs an encoded image but stages[1] "decode" produces an image"#) == true,
      "\(problems(in: misplaced))")
  }
}

/// The getting-started articles show only code that is compiled: each Swift or JSON block of an
/// article appears, line for line (indentation aside), in the files it is taken from.
@Suite("Getting-started articles")
struct ArticleCodeTests {
  static let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

  static let sources: [String: [String]] = [
    "PipelinesInCode.md": ["Tests/DarkroomTests/GettingStartedTests.swift"],
    "JSONPipelineWithYourOwnStage.md": ["Tests/DarkroomTests/GettingStartedTests.swift"],
    "ServingThumbnailsWithHummingbird.md": [
      "Examples/hummingbird-thumbnails/Package.swift",
      "Examples/hummingbird-thumbnails/Sources/ThumbnailServer/Thumbnails.swift",
      "Examples/hummingbird-thumbnails/Sources/ThumbnailServer/main.swift",
    ],
  ]

  /// The fenced blocks of a Markdown text in `languages`, each as its lines.
  static func blocks(in text: String, languages: Set<String>) -> [[String]] {
    var blocks: [[String]] = []
    var fence: (language: String, lines: [String])?
    for line in text.components(separatedBy: "\n") {
      let trimmed = line.trimmingCharacters(in: .whitespaces)
      if let open = fence {
        if trimmed == "```" {
          if languages.contains(open.language) { blocks.append(open.lines) }
          fence = nil
        } else {
          fence?.lines.append(line)
        }
      } else if trimmed.hasPrefix("```") {
        fence = (String(trimmed.dropFirst(3)), [])
      }
    }
    return blocks
  }

  static func normalized(_ lines: [String]) -> [String] {
    lines.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
  }

  @Test("every Swift and JSON block of the getting-started articles is compiled code", arguments: sources.keys.sorted())
  func articleCodeIsCompiled(article: String) throws {
    let text = try String(
      contentsOf: Self.package.appendingPathComponent("Sources/Darkroom/Darkroom.docc/" + article), encoding: .utf8)
    let files = try (Self.sources[article] ?? []).map {
      Self.normalized(
        try String(contentsOf: Self.package.appendingPathComponent($0), encoding: .utf8).components(separatedBy: "\n"))
    }
    // Imports are compared on their own: the rest of a block is one run of lines in a file.
    let imports = files.map { Set($0.filter { $0.hasPrefix("import ") }) }
    let bodies = files.map { $0.filter { !$0.hasPrefix("import ") } }
    let blocks = Self.blocks(in: text, languages: ["swift", "json"])
    #expect(!blocks.isEmpty)
    for block in blocks {
      let lines = Self.normalized(block)
      let blockImports = lines.filter { $0.hasPrefix("import ") }
      let code = lines.filter { !$0.hasPrefix("import ") }
      let found = bodies.indices.contains { index in
        let file = bodies[index]
        return blockImports.allSatisfy(imports[index].contains)
          && (code.isEmpty
            || file.indices.contains { start in
              start + code.count <= file.count && Array(file[start..<start + code.count]) == code
            })
      }
      #expect(found, "not in \(Self.sources[article] ?? []):\n\(block.joined(separator: "\n"))")
    }
  }
}
