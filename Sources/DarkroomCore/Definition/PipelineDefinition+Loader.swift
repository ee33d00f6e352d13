extension PipelineDefinition {
  /// Walks a parsed definition, collecting issues.
  struct Loader {
    let registry: StageRegistry
    let context: StageBuildContext
    var issues: [PipelineError.Issue] = []

    init(registry: StageRegistry, context: StageBuildContext) {
      self.registry = registry
      self.context = context
    }

    mutating func issue(_ path: String, _ message: String, code: PipelineError.Code = .invalidDefinition) {
      issues.append(.init(code: code, path: path, message: message))
    }

    mutating func buildSet(_ document: JSONValue, defaultName: String) -> PipelineSet? {
      guard case .object(let members) = document else {
        issue(
          "", "a pipeline definition is a JSON object like {\"version\": 1, \"stages\": [...]}, got \(document.kindDescription)")
        return nil
      }
      for (key, _) in members where !PipelineDefinition.rootKeys.contains(key) {
        var message = "unknown key \"\(key)\""
        if let guess = Suggestion.closest(to: key, in: PipelineDefinition.rootKeys) { message += "; did you mean \"\(guess)\"?" }
        issue(key, message + " (allowed: " + PipelineDefinition.rootKeys.joined(separator: ", ") + ")")
      }
      checkVersion(document["version"])
      var name = defaultName
      if let value = document["name"] {
        if case .string(let text) = value, !text.isEmpty {
          name = text
        } else {
          issue("name", "expected a non-empty string, got \(value)")
        }
      }
      switch document["description"] {
      case nil, .string?: break
      case let value?: issue("description", "expected a string, got \(value)")
      }
      var fusion = true
      if let value = document["fusion"] {
        if case .bool(let flag) = value { fusion = flag } else { issue("fusion", "expected true or false, got \(value)") }
      }
      guard let stagesValue = document["stages"] else {
        issue(
          "", "the key \"stages\" is missing: list the stages, e.g. \"stages\": [{\"stage\": \"fetch\"}, {\"stage\": \"decode\"}]"
        )
        return nil
      }
      guard case .array(let items) = stagesValue, !items.isEmpty else {
        issue("stages", "expected a non-empty array of stage objects, got \(stagesValue)")
        return nil
      }
      guard items.count <= PipelineDefinition.maxStages else {
        issue(
          "stages",
          "\(items.count) stages; a pipeline has at most \(PipelineDefinition.maxStages): split the work into several pipelines")
        return nil
      }
      let stages = buildStages(items, path: "stages", after: [])
      guard let variantsValue = document["variants"] else {
        checkNeighbours(stages)
        guard issues.isEmpty else { return nil }
        return PipelineSet(
          name: name,
          variants: [.init(name: nil, graph: StageGraph(trusting: name, stages: stages.compactMap { $0 }, fusion: fusion))])
      }
      checkNeighbours(stages)
      let variants = buildVariants(variantsValue, after: stages)
      guard issues.isEmpty else { return nil }
      // One decode shared by every variant: no shrink-on-load across the prefix when there are several.
      let variantFusion = fusion && variants.count <= 1
      return PipelineSet(
        name: name,
        variants: variants.map { variant in
          .init(name: variant.name, graph: StageGraph(trusting: name, stages: variant.stages, fusion: variantFusion))
        })
    }

    /// Builds stages in order: a pass-through kind takes its type from the stage before it.
    mutating func buildStages(_ items: [JSONValue], path: String, after prefix: [AnyStage?]) -> [AnyStage?] {
      var stages = prefix
      for (index, item) in items.enumerated() {
        let flowing = stages.isEmpty ? ImageSource.self : stages[stages.count - 1]?.outputType
        stages.append(buildStage(item, path: "\(path)[\(index)]", flowing: flowing))
      }
      return Array(stages.dropFirst(prefix.count))
    }

    /// `"variants": [{"name": "64", "stages": [...]}, ...]`: each variant's whole stage list.
    mutating func buildVariants(_ value: JSONValue, after prefix: [AnyStage?]) -> [(name: String, stages: [AnyStage])] {
      guard case .array(let items) = value, !items.isEmpty else {
        issue("variants", "expected a non-empty array like [{\"name\": \"small\", \"stages\": [...]}], got \(value)")
        return []
      }
      guard items.count <= PipelineDefinition.maxVariants else {
        issue(
          "variants",
          "\(items.count) variants; a pipeline has at most \(PipelineDefinition.maxVariants): split them over several pipeline files"
        )
        return []
      }
      var built: [(name: String, stages: [AnyStage])] = []
      var names: Set<String> = []
      for (index, item) in items.enumerated() {
        let path = "variants[\(index)]"
        guard case .object(let members) = item else {
          issue(path, "expected a variant object like {\"name\": \"small\", \"stages\": [...]}, got \(item)")
          continue
        }
        for (key, _) in members where key != "name" && key != "stages" {
          issue("\(path).\(key)", "unknown key \"\(key)\" (allowed: name, stages)")
        }
        guard case .string(let name)? = item["name"], PipelineDefinition.isVariantName(name) else {
          issue(
            "\(path).name",
            "give the variant a name of letters, digits, \"-\", \"_\" or \".\" (it becomes part of file names), got \(item["name"].map { "\($0)" } ?? "nothing")"
          )
          continue
        }
        if !names.insert(name).inserted { issue("\(path).name", "the variant name \"\(name)\" is used twice") }
        guard case .array(let stageItems)? = item["stages"], !stageItems.isEmpty else {
          issue("\(path).stages", "expected a non-empty array of the variant's stages")
          continue
        }
        guard prefix.count + stageItems.count <= PipelineDefinition.maxStages else {
          issue(
            "\(path).stages",
            "\(prefix.count) shared and \(stageItems.count) own stages; a variant has at most \(PipelineDefinition.maxStages) in all"
          )
          continue
        }
        let own = buildStages(stageItems, path: "\(path).stages", after: prefix)
        let whole = prefix + own
        let before = issues.count
        checkNeighbours(whole, from: prefix.count)
        // Report a mismatch at the variant's own path.
        for position in before..<issues.count {
          let old = issues[position].path
          if let range = old.range(of: #"^stages\[(\d+)\]"#, options: .regularExpression),
            let number = Int(old[range].dropFirst("stages[".count).dropLast()), number >= prefix.count
          {
            issues[position].path = "\(path).stages[\(number - prefix.count)]" + old[range.upperBound...]
          }
        }
        if issues.count == before, whole.allSatisfy({ $0 != nil }) { built.append((name, whole.compactMap { $0 })) }
      }
      return built
    }

    mutating func checkVersion(_ value: JSONValue?) {
      let supported = PipelineDefinition.supportedVersions.map(String.init).joined(separator: ", ")
      guard let value else {
        issue("version", "the key \"version\" is missing: add \"version\": 1")
        return
      }
      guard let version = value.intValue else {
        issue("version", "expected an integer version (\(supported)), got \(value)")
        return
      }
      if !PipelineDefinition.supportedVersions.contains(version) {
        issue(
          "version",
          "unsupported version \(version): this Darkroom reads version \(supported); update Darkroom or rewrite the file for version \(supported)"
        )
      }
    }

    mutating func buildStage(_ value: JSONValue, path: String, flowing: (any Sendable.Type)?) -> AnyStage? {
      guard case .object(let members) = value else {
        issue(path, "expected a stage object like {\"stage\": \"decode\"}, got \(value)")
        return nil
      }
      guard let kindValue = value["stage"] else {
        issue(
          path,
          "the key \"stage\" is missing: name the stage kind, one of "
            + registry.kinds.map { "\"\($0)\"" }.joined(separator: ", "))
        return nil
      }
      guard case .string(let kind) = kindValue else {
        issue("\(path).stage", "expected a stage kind string, got \(kindValue)")
        return nil
      }
      guard let entry = registry.entry(for: kind) else {
        var message = "unknown stage kind \"\(kind)\""
        if let guess = Suggestion.closest(to: kind, in: registry.kinds) {
          message += "; did you mean \"\(guess)\"?"
        } else {
          message += "; known kinds: " + registry.kinds.joined(separator: ", ")
        }
        issue("\(path).stage", message, code: .unknownStage)
        return nil
      }
      let (filled, optionIssues) = OptionValidator.validate(
        members, specs: entry.specs, path: path, owner: "\"\(kind)\"", ignoring: ["stage"])
      guard optionIssues.isEmpty else {
        issues += optionIssues
        return nil
      }
      do {
        guard let valueType = flowing ?? (entry.passesThrough ? nil : ImageSource.self) else {
          return nil  // the stage before it is already reported as broken
        }
        return try entry.make(filled, context, valueType)
      } catch let problems as OptionProblems {
        for problem in problems.problems { issue(problem.option.map { "\(path).\($0)" } ?? path, problem.message) }
      } catch let error as PipelineError {
        issue(path, error.message, code: error.code)
      } catch {
        issue(path, "\"\(kind)\" could not be created: \(error)")
      }
      return nil
    }

    mutating func checkNeighbours(_ stages: [AnyStage?], from start: Int = 0) {
      if start == 0, let first = stages.first, let first, !first.accepts(ImageSource.self) {
        var message =
          "stages[0] \"\(first.kind)\" needs \(valueDescription(of: first.inputType)) but a pipeline starts from a source"
        if let bridge = registry.kinds(from: ImageSource.self, to: first.inputType).first {
          message += ": add a \"\(bridge)\" stage first"
        } else if let fetch = registry.kinds(producing: first.inputType).first {
          message += ": start with stages that produce it, such as \"\(fetch)\""
        }
        issue("stages[0]", message, code: .typeMismatch)
      }
      for index in stages.indices.dropFirst(max(1, start)) {
        guard let previous = stages[index - 1], let next = stages[index], !previous.feeds(next) else { continue }
        issues.append(
          StageGraph.mismatch(previous: previous, index: index, next: next, path: "stages[\(index)]", registry: registry))
      }
    }
  }
}
