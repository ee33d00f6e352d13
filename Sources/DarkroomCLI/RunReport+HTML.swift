import Foundation

extension RunReport {
  /// Tiles on one page of the contact sheet: the page renders these from the JSON blob, so a
  /// report of 10,000 outputs holds 200 images in its DOM at a time.
  static let pageSize = 200

  /// The page: self-contained (inline CSS, JS and SVG, thumbnails as `data:` URLs, no request to
  /// anything). Text from outside (names, URLs, messages, the pipeline) is HTML-escaped where it
  /// is in the markup, and sits in the JSON blob with `<`, `>`, `&`, U+2028 and U+2029 written as
  /// `\u` escapes, so that no `</script>` or `<!--` can end the blob; the script puts it into the
  /// page with `textContent` only.
  func html() throws -> String {
    let blob = Self.scriptSafeJSON(try JSONEncoder().encode(Blob(outputs: outputs, failures: failures, pageSize: Self.pageSize)))
    let title = Self.escapeHTML("Darkroom run: \(pipelineName)")
    return """
      <!DOCTYPE html>
      <html lang="en"><head><meta charset="utf-8">
      <meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
      <title>\(title)</title>
      <style>\(Self.css)</style></head>
      <body>
      <h1>\(title)</h1>
      <p id="summary">\(Self.escapeHTML(summary))</p>
      <h2>Outputs</h2>
      <p id="total" data-total="\(outputs.count)">\(outputs.count) output\(outputs.count == 1 ? "" : "s")</p>
      <nav id="pager"><button id="prev" type="button">&larr; previous</button> <span id="page"></span> <button id="next" type="button">next &rarr;</button></nav>
      <div id="sheet"></div>
      <h2>Failures</h2>
      <p id="failure-total" data-total="\(failures.count)">\(failures.count) failure\(failures.count == 1 ? "" : "s")</p>
      <table id="failures"><thead><tr><th>input</th><th>variant</th><th>code</th><th>stage</th><th>message</th></tr></thead><tbody></tbody></table>
      <h2>Time per image</h2>
      \(histogramSVG())
      <h2>Pipeline</h2>
      <pre id="pipeline">\(Self.escapeHTML(pipelineText))</pre>
      <script type="application/json" id="data">\(blob)</script>
      <script>\(Self.script)</script>
      </body></html>

      """
  }

  /// What the script reads.
  private struct Blob: Encodable {
    var outputs: [Output]
    var failures: [Failure]
    var pageSize: Int
  }

  /// `text` safe as HTML text and attribute values.
  static func escapeHTML(_ text: String) -> String {
    text.escaping(["&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"])
  }

  /// JSON text that can sit inside `<script>`: these characters occur in JSON only inside
  /// strings, where their `\u` escapes mean the same.
  static func scriptSafeJSON(_ data: Data) -> String {
    String(decoding: data, as: UTF8.self).escaping([
      "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u{2028}": "\\u2028", "\u{2029}": "\\u2029",
    ])
  }

  /// A histogram of the milliseconds per input, as inline SVG: 20 bins from 0 to the slowest.
  func histogramSVG() -> String {
    guard let slowest = durations.max(), slowest.isFinite, slowest > 0 else {
      return "<p id=\"histogram\">no image was timed</p>"
    }
    let binCount = 20
    var bins = [Int](repeating: 0, count: binCount)
    for value in durations where value.isFinite {
      bins[min(binCount - 1, max(0, Int(value / slowest * Double(binCount))))] += 1
    }
    let tallest = max(1, bins.max() ?? 1)
    let (width, height, left, bottom) = (600.0, 200.0, 40.0, 30.0)
    let barWidth = (width - left) / Double(binCount)
    var bars = ""
    for (index, count) in bins.enumerated() {
      let barHeight = (height - bottom - 10) * Double(count) / Double(tallest)
      let from = slowest * Double(index) / Double(binCount)
      let to = slowest * Double(index + 1) / Double(binCount)
      bars += String(
        format: "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>%.1f–%.1f ms: %d</title></rect>",
        left + Double(index) * barWidth + 1, height - bottom - barHeight, barWidth - 2, barHeight, from, to, count)
    }
    let axis = String(
      format: "<text x=\"%.0f\" y=\"%.0f\">0 ms</text><text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.1f ms</text>"
        + "<text x=\"2\" y=\"14\">%d</text>", left, height - 10, width, height - 10, slowest, tallest)
    return "<svg id=\"histogram\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
      + "viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"time per image\">"
      + "<line x1=\"\(Int(left))\" y1=\"\(Int(height - bottom))\" x2=\"\(Int(width))\" y2=\"\(Int(height - bottom))\" stroke=\"#888\"/>"
      + bars + axis + "</svg>"
  }

  static let css = """
    body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.3em}
    #sheet{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:8px}
    .tile{border:1px solid #ddd;border-radius:4px;padding:6px;text-align:center;overflow:hidden}
    .tile img,.tile .none{width:96px;height:96px;object-fit:contain;display:block;margin:0 auto 4px}
    .tile .none{background:#eee;line-height:96px;color:#999;font-size:12px}
    .name{font-weight:600;word-break:break-all}.meta{color:#666;font-size:12px}
    table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
    td{word-break:break-all}pre{background:#f6f6f6;padding:8px;overflow:auto;max-height:30em}
    .bar{fill:#4a7bd0}svg text{font-size:11px;fill:#444}
    """

  static let script = """
    (function(){
    var data=JSON.parse(document.getElementById('data').textContent);
    var outputs=data.outputs,size=data.pageSize,pages=Math.max(1,Math.ceil(outputs.length/size)),page=0;
    function el(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;if(text!=null)e.textContent=String(text);return e;}
    function base(p){var i=p.lastIndexOf('/');return i<0?p:p.slice(i+1);}
    function bytes(n){if(n==null)return '';if(n<1024)return n+' B';if(n<1048576)return (n/1024).toFixed(1)+' KB';return (n/1048576).toFixed(1)+' MB';}
    function render(){
      var sheet=document.getElementById('sheet');sheet.textContent='';
      var end=Math.min(outputs.length,(page+1)*size);
      for(var i=page*size;i<end;i++){
        var o=outputs[i],t=el('div','tile');t.title=o.path+'\\n'+o.source;
        if(o.thumbnail&&o.thumbnail.indexOf('data:image/webp;base64,')===0){var img=el('img');img.alt='';img.src=o.thumbnail;t.appendChild(img);}
        else t.appendChild(el('div','none','no thumbnail'));
        t.appendChild(el('div','name',base(o.path)));
        var dims=(o.width!=null&&o.height!=null)?o.width+'×'+o.height:'';
        t.appendChild(el('div','meta',[dims,o.format||'',bytes(o.bytes),o.milliseconds.toFixed(1)+' ms'].filter(Boolean).join(' · ')));
        sheet.appendChild(t);
      }
      document.getElementById('page').textContent='page '+(page+1)+' of '+pages+' ('+(outputs.length?page*size+1:0)+'–'+end+' of '+outputs.length+')';
      document.getElementById('prev').disabled=page===0;document.getElementById('next').disabled=page>=pages-1;
    }
    document.getElementById('prev').onclick=function(){if(page>0){page--;render();}};
    document.getElementById('next').onclick=function(){if(page<pages-1){page++;render();}};
    var body=document.querySelector('#failures tbody');
    data.failures.forEach(function(f){var r=el('tr','failure');[f.source,f.variant||'',f.code,f.stage||'',f.message].forEach(function(v){r.appendChild(el('td',null,v));});body.appendChild(r);});
    render();
    })();
    """
}
