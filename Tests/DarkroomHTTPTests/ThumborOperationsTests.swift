import Darkroom
import DarkroomHTTP
import Testing

@Suite("thumbor URLs to stages")
struct ThumborOperationsTests {
  let operations = ThumborOperations(configuration: ServedFixtures.configuration(origin: "https://origin.example/"))

  func identifiers(_ path: String, accept: String? = nil) throws -> [String] {
    try operations.stages(for: ThumborURL(path: path), accept: accept).stages.map(\.identifier)
  }

  // URLs from thumbor's documentation ("Usage" and the filter pages), each with the operations
  // thumbor does for it.
  @Test("thumbor's documented URLs make thumbor's operations")
  func documentedURLs() throws {
    let smart = try identifiers("/unsafe/300x200/smart/thumbor.org/logo.png")
    #expect(smart[1].hasPrefix("resize(300x200,fill,lanczos3,upscale=true,attention"))
    let fitIn = try identifiers("/unsafe/fit-in/300x200/thumbor.org/logo.png")
    #expect(fitIn[1].hasPrefix("resize(300x200,fit,lanczos3,upscale=false"))
    let widthOnly = try identifiers("/unsafe/300x0/thumbor.org/logo.png")
    #expect(widthOnly[1].hasPrefix("resize(300xauto,fit,lanczos3,upscale=true"))
    let aligned = try identifiers("/unsafe/200x100/left/top/thumbor.org/logo.png")
    #expect(aligned[1].contains(",fill,") && aligned[1].contains("northwest"))
    let cropped = try identifiers("/unsafe/10x20:110x220/50x50/thumbor.org/logo.png")
    #expect(cropped[1] == Cropper(.pixels(x: 10, y: 20, width: 100, height: 200)).identifier)
    let filled = try identifiers("/unsafe/fit-in/300x200/filters:fill(blue)/thumbor.org/logo.png")
    #expect(filled[2].contains(",center,") && filled[2].contains("background=0.0/0.0/255.0/255.0"))
    let noUpscale = try identifiers("/unsafe/1000x0/filters:no_upscale()/thumbor.org/logo.png")
    #expect(noUpscale[1].contains("upscale=false"))
    let upscale = try identifiers("/unsafe/fit-in/1000x1000/filters:upscale()/thumbor.org/logo.png")
    #expect(upscale[1].contains("upscale=true"))
    let format = try identifiers("/unsafe/filters:format(webp):quality(70)/thumbor.org/logo.png", accept: "image/avif")
    #expect(format == [format[0], ImageEncoder(.webp(quality: 70)).identifier])
    let background = try identifiers("/unsafe/filters:background_color(ff0000):format(jpeg)/thumbor.org/logo.png")
    #expect(background.last == ImageEncoder(.jpeg(quality: 80), background: [255, 0, 0]).identifier)
    #expect(try identifiers("/unsafe/filters:strip_icc():strip_exif()/thumbor.org/logo.png").count == 2)
  }

  @Test("adaptive-fit-in turns the box to the image; full-fit-in covers it")
  func adaptiveAndFull() throws {
    let adaptive = ThumborFitProbe(mode: "adaptive-fit-in", width: 300, height: 200)
    #expect(try adaptive.kinds() == ["decode", "thumbor-fit", "encode"])
  }

  @Test("the format comes from Accept when the URL names none, and says so")
  func negotiated() throws {
    let url = try ThumborURL(path: "/unsafe/fit-in/100x100/a.jpg")
    let avif = try operations.stages(for: url, accept: "image/avif,image/webp,*/*")
    #expect(avif.variesOnAccept && avif.stages.last?.identifier.contains("encode(avif(q=50") == true)
    let plain = try operations.stages(for: url, accept: "*/*")
    #expect(plain.variesOnAccept && plain.stages.last?.identifier.contains("jpeg-or-png(q=80)") == true)
    let named = try operations.stages(for: try ThumborURL(path: "/unsafe/filters:format(png)/a.jpg"), accept: "image/webp")
    #expect(!named.variesOnAccept)
  }

  @Test(
    "flips, then the filters' operations in the URL's order, between the resize and the encoder",
    arguments: [
      ("/unsafe/-300x200/a.jpg", ["flip(horizontal)"]),
      ("/unsafe/300x-200/a.jpg", ["flip(vertical)"]),
      ("/unsafe/-300x-200/a.jpg", ["flip(both)"]),
      ("/unsafe/fit-in/300x200/filters:rotate(90):grayscale()/a.jpg", ["rotate(270)", "grayscale"]),
      ("/unsafe/filters:rotate(-90)/a.jpg", ["rotate(90)"]),
      ("/unsafe/filters:rotate(90.0)/a.jpg", ["rotate(270)"]),
      ("/unsafe/filters:rotate(540):blur(2)/a.jpg", ["rotate(180)", "blur(2.0)"]),
      ("/unsafe/filters:rotate(0):blur(0)/a.jpg", []),
      ("/unsafe/filters:blur(3,1.5):sharpen(2,0.5,true)/a.jpg", ["blur(1.5)", "sharpen(0.5,2.0)"]),
      ("/unsafe/trim/-300x200/filters:grayscale()/a.jpg", ["trim(10.0,top-left)", "flip(horizontal)", "grayscale"]),
      ("/unsafe/trim:bottom-right:30/a.jpg", ["trim(30.0,bottom-right)"]),
      ("/unsafe/trim:400/a.jpg", ["trim(255.0,top-left)"]),
      ("/unsafe/filters:round_corner(20,255,255,255)/a.png", ["round(20.0)", "flatten(255,255,255)"]),
      ("/unsafe/filters:round_corner(20|40,0,0,0,1)/a.png", ["round(20.0|40.0)"]),
      (
        "/unsafe/filters:brightness(-50):saturation(100):brightness(0)/a.jpg", ["modulate(0.5,1.0,0.0)", "modulate(1.0,2.0,0.0)"]
      ),
    ])
  func operationsInOrder(_ path: String, expected: [String]) throws {
    let identifiers = try self.identifiers(path)
    let kinds = ["trim", "flip", "rotate", "grayscale", "blur", "sharpen", "modulate", "round", "flatten"]
    #expect(identifiers.filter { id in kinds.contains { id.hasPrefix($0) } } == expected, "\(identifiers)")
    #expect(identifiers.last?.hasPrefix("encode") == true || identifiers.last?.hasPrefix("jpeg") == true, "\(identifiers)")
  }

  @Test(
    "what has no stage yet, and a bad argument, is refused by name",
    arguments: [
      ("/unsafe/filters:watermark(a.png,0,0,0)/a.jpg", "unsupported filter watermark"),
      ("/unsafe/filters:noise(10)/a.jpg", "unsupported filter noise"),
      ("/unsafe/filters:rotate(45)/a.jpg", "multiple of 90"),
      ("/unsafe/filters:rotate(9999999999)/a.jpg", "multiple of 90"),
      ("/unsafe/filters:grayscale(1)/a.jpg", "grayscale takes 0 to 0 arguments"),
      ("/unsafe/filters:blur(151)/a.jpg", "radius is a number from 0.0 to 150.0"),
      ("/unsafe/filters:blur(2,nan)/a.jpg", "sigma"),
      ("/unsafe/filters:sharpen(1)/a.jpg", "sharpen takes 2 to 3 arguments"),
      ("/unsafe/filters:blur(0x10)/a.jpg", "radius is a number"),
      ("/unsafe/filters:blur(1e2)/a.jpg", "radius is a number"),
      ("/unsafe/filters:blur(1):blur(1):sharpen(1,1):blur(1):sharpen(1,1)/a.jpg", "at most 4 blur and sharpen filters"),
      ("/unsafe/filters:brightness(101)/a.jpg", "amount is a number from -100.0 to 100.0"),
      ("/unsafe/filters:round_corner(20|,0,0,0)/a.jpg", "radius is a|b"),
      ("/unsafe/filters:round_corner(20,0,0,256)/a.jpg", "three numbers from 0 to 255"),
      ("/unsafe/filters:round_corner(20,0,0,0,maybe)/a.jpg", "transparent"),
      ("/unsafe/filters:sharpen(1,0,true)/a.jpg", "radius"),
      ("/unsafe/filters:sharpen(1,1,maybe)/a.jpg", "luminance_only"),
      ("/unsafe/filters:max_bytes(0)/a.jpg", "max_bytes"),
      ("/unsafe/filters:format(bmp)/a.jpg", "unsupported format bmp"),
      ("/unsafe/filters:quality(101)/a.jpg", "quality"),
      ("/unsafe/filters:fill(notacolour)/a.jpg", "colour"),
      ("/unsafe/20x20:10x10/a.jpg", "crop"),
    ])
  func refused(_ path: String, message: String) throws {
    let error = #expect(throws: PipelineError.self) { try self.identifiers(path) }
    #expect(error?.code == .invalidInput)
    #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
  }
}

/// The stage kinds a fit mode makes.
struct ThumborFitProbe {
  var mode: String
  var width: Int
  var height: Int

  func kinds() throws -> [String] {
    let operations = ThumborOperations(configuration: ServedFixtures.configuration(origin: "https://origin.example/"))
    return try operations.stages(for: ThumborURL(path: "/unsafe/\(mode)/\(width)x\(height)/a.jpg"), accept: nil).stages.map(
      \.kind)
  }
}
