import Darkroom
import DarkroomTesting
import Testing

@Suite("Pipeline definitions")
struct PipelineDefinitionTests {
  let registry = Darkroom.standardRegistry

  func problems(_ json: String) -> [String] {
    do {
      _ = try PipelineDefinition.load(json: json, registry: registry)
      return []
    } catch {
      return error.issues.map(\.description)
    }
  }

  func stages(_ stages: String) -> String { #"{"version": 1, "name": "t", "stages": [\#(stages)]}"# }

  @Test func loadsAValidDefinitionAndFuses() throws {
    let graph = try PipelineDefinition.load(
      json: stages(
        #"{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 64}, {"stage": "encode", "format": "png"}"#),
      registry: registry)
    #expect(graph.name == "t")
    #expect(graph.stages.map(\.kind) == ["fetch", "decode", "resize", "encode"])
    #expect(graph.runnableStages.map(\.kind) == ["fetch", "decode+resize", "encode"])
    #expect(graph.fusion(false).runnableStages.map(\.kind) == ["fetch", "decode", "resize", "encode"])
  }

  @Test("exact messages for invalid definitions")
  func exactMessages() {
    let cases: [(String, [String])] = [
      (
        stages(#"{"stage": "fetch"}, {"stage": "decod"}"#),
        [#"stages[1].stage: unknown stage kind "decod"; did you mean "decode"?"#]
      ),
      (
        stages(#"{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": -5}"#),
        ["stages[2].width: expected a positive integer, got -5"]
      ),
      (
        stages(#"{"stage": "fetch"}, {"stage": "decode"}, {"stage": "encode", "format": "jpeg", "quality": 0}"#),
        ["stages[2].quality: expected an integer from 1 to 100, got 0"]
      ),
      (
        stages(
          #"{"stage": "fetch"}, {"stage": "decode"}, {"stage": "crop", "rect": {"x": 0.5, "y": 0, "width": 0.8, "height": 1}}"#),
        ["stages[2].rect: x + width is 1.3, past the right edge (1)"]
      ),
      (
        stages(#"{"stage": "fetch"}, {"stage": "resize", "width": 10}"#),
        [#"stages[1] "resize" needs an image but stages[0] "fetch" produces bytes: add a "decode" stage between them"#]
      ),
      (
        #"{"version": 2, "stages": [{"stage": "fetch"}]}"#,
        ["version: unsupported version 2: this Darkroom reads version 1; update Darkroom or rewrite the file for version 1"]
      ),
      (
        stages(#"{"stage": "fetch", "allowHosts": ["127.0.0.1/", "10.0.0.0/08", "::1/128"]}"#),
        [
          #"stages[0].allowHosts[0]: "127.0.0.1/" is not a valid CIDR range like "10.0.0.0/8""#,
          #"stages[0].allowHosts[1]: "10.0.0.0/08" is not a valid CIDR range like "10.0.0.0/8""#,
        ]
      ),
      (
        stages(#"{"stage": "fetch", "maxbytes": 10}"#),
        [#"stages[0].maxbytes: unknown option "maxbytes" for "fetch"; did you mean "maxBytes"?"#]
      ),
      (
        stages(#"{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 10, "mode": "fil"}"#),
        [#"stages[2].mode: expected one of "fit", "fill", "stretch", "center", got "fil"; did you mean "fill"?"#]
      ),
      (
        stages(#"{"stage": "fetch"}, {"stage": "decode"}, {"stage": "encode"}"#),
        [
          #"stages[2]: "encode" needs the option "format" (one of "jpeg", "png", "webp", "avif", "gif", "auto"): The output format; auto keeps the source's (TIFF becomes PNG, HEIF becomes AVIF)."#
        ]
      ),
      (
        stages(#"{"stage": "decode"}"#),
        [#"stages[0] "decode" needs bytes but a pipeline starts from a source: add a "fetch" stage first"#]
      ),
      (
        stages(#"{"stage": "fetch"}, {"stage": "decode", "autoRotate": "yes"}"#),
        [#"stages[1].autoRotate: expected true or false, got "yes""#]
      ),
      (#"{"version": 1, "stages": []}"#, ["stages: expected a non-empty array of stage objects, got an array of 0"]),
      (
        #"{"version": 1, "stage": [], "stages": [{"stage": "fetch"}]}"#,
        [#"stage: unknown key "stage"; did you mean "stages"? (allowed: version, name, description, fusion, stages, variants)"#]
      ),
      (
        stages(#"{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "mode": "fit"}"#),
        [#"stages[2]: give "width", "height" or both"#]
      ),
      (
        stages(
          #"{"stage": "fetch"}, {"stage": "decode"}, {"stage": "encode", "format": "png"}, {"stage": "write", "template": "../{name}.{ext}"}"#
        ),
        [#"stages[3].template: the template may not contain "..": outputs stay inside the output directory"#]
      ),
    ]
    for (json, expected) in cases {
      #expect(problems(json) == expected, "\(json)")
    }
  }

  @Test("every problem is reported at once")
  func allProblemsAtOnce() {
    let found = problems(#"{"version": 3, "stages": [{"stage": "fetch", "maxBytes": 0}, {"stage": "vignette"}]}"#)
    #expect(found.count == 3)
    #expect(found.contains { $0.hasPrefix("version: unsupported version 3") })
    #expect(found.contains("stages[0].maxBytes: expected a positive integer, got 0"))
    #expect(found.contains { $0.hasPrefix(#"stages[1].stage: unknown stage kind "vignette""#) })
  }

  @Test("a definition is bounded: at most maxStages stages (shared ones included) and maxVariants variants")
  func boundedDefinitions() throws {
    let stage = #"{"stage": "resize", "width": 64}"#
    func pipeline(_ shared: Int, variants: Int = 0, own: Int = 1) -> String {
      let prefix = [#"{"stage": "fetch"}"#, #"{"stage": "decode"}"#] + Array(repeating: stage, count: max(0, shared - 2))
      guard variants > 0 else { return stages(prefix.joined(separator: ", ")) }
      let ownStages = (Array(repeating: stage, count: own - 1) + [#"{"stage": "encode", "format": "png"}"#]).joined(
        separator: ", ")
      let list = (0..<variants).map { #"{"name": "v\#($0)", "stages": [\#(ownStages)]}"# }.joined(separator: ", ")
      return #"{"version": 1, "name": "t", "stages": [\#(prefix.joined(separator: ", "))], "variants": [\#(list)]}"#
    }
    let most = PipelineDefinition.maxStages
    #expect(problems(pipeline(most)).isEmpty)
    #expect(problems(pipeline(most + 1)).contains { $0.hasPrefix("stages: \(most + 1) stages; a pipeline has at most \(most)") })
    #expect(problems(pipeline(2, variants: PipelineDefinition.maxVariants, own: most - 2)).isEmpty)
    #expect(
      problems(pipeline(2, variants: PipelineDefinition.maxVariants + 1)).contains {
        $0.hasPrefix("variants: \(PipelineDefinition.maxVariants + 1) variants")
      })
    #expect(problems(pipeline(3, variants: 1, own: most - 2)).contains { $0.hasPrefix("variants[0].stages: 3 shared and") })
    // A file of 100,000 stages is refused at once, before any stage is built.
    let huge = stages(Array(repeating: #"{"stage": "fetch"}"#, count: 100_000).joined(separator: ","))
    #expect(problems(huge) == ["stages: 100000 stages; a pipeline has at most \(most): split the work into several pipelines"])
  }

  @Test func malformedJSONSaysWhere() {
    #expect(
      problems("{\n  \"version\": 1,\n  \"stages\": [\n    {\"stage\": \"fetch\",}\n  ]\n}") == [
        "malformed JSON at line 4, column 23: trailing comma before '}'"
      ])
  }

  @Test func codesAreStable() throws {
    do {
      _ = try PipelineDefinition.load(json: stages(#"{"stage": "fetsh"}"#), registry: registry)
      Issue.record("accepted an unknown stage")
    } catch {
      #expect(error.code == .unknownStage)
    }
    do {
      _ = try PipelineDefinition.load(
        json: stages(#"{"stage": "fetch"}, {"stage": "encode", "format": "png"}"#), registry: registry)
      Issue.record("accepted mismatched stages")
    } catch {
      #expect(error.code == .typeMismatch)
    }
  }

  @Test func schemaListsEveryKindAndOption() throws {
    let schema = JSONSchema.document(for: registry)
    let text = schema.jsonText
    let reparsed = try JSONParser.parse(text)
    #expect(reparsed == schema)
    guard case .array(let kinds)? = schema["properties"]?["stages"]?["items"]?["oneOf"] else {
      Issue.record("no stage schemas")
      return
    }
    #expect(kinds.count == registry.kinds.count)
    for entry in registry.allEntries {
      let kindSchema = kinds.first { $0["title"] == .string(entry.kind) }
      for spec in entry.specs { #expect(kindSchema?["properties"]?[spec.name] != nil, "\(entry.kind).\(spec.name)") }
    }
    #expect(schema["properties"]?["stages"]?["items"]?["oneOf"] != nil)
  }
}
