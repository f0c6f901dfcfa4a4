"""Read <tag>...</tag> spans in linear time, whatever a model writes.

The usual pattern, `<tag>\\s*(.*?)\\s*</tag>` (verifiers' XMLParser uses it), backtracks: after an
unclosed tag, its time grows with the cube of the whitespace that follows ("<move>" and 3,200
newlines took 15.6 s to judge), and `<tag>(.*?)</tag>` grows with the square of a reply that
repeats an unclosed tag. A model can write such replies within its token budget, and scoring must
not stall on them. These helpers only use `str.find`, so every character is looked at a bounded
number of times.
"""

from types import SimpleNamespace

import verifiers as vf


def tag_contents(text: str, tag: str) -> list[str]:
    """The contents of every <tag>...</tag> in `text`, in order, each ending at the first closing
    tag after its opening one: what re.findall(r"<tag>(.*?)</tag>", text, re.DOTALL) returns."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    contents, position = [], 0
    while (start := text.find(opening, position)) != -1:
        end = text.find(closing, start + len(opening))
        if end == -1:
            break
        contents.append(text[start + len(opening):end])
        position = end + len(closing)
    return contents


class LinearXMLParser(vf.XMLParser):
    """verifiers' XMLParser with the same answers from `parse`, in linear time (see the module doc).

    Each field gets the first (or with last=True the last) <tag>...</tag> content, without the
    whitespace around it (the regex's \\s* strips it whether or not `strip` is set), or None.
    """

    def parse(self, text: str, strip: bool = True, last: bool = False) -> SimpleNamespace:
        results = {}
        for _, alternatives in self._fields:
            for tag in alternatives:
                contents = tag_contents(text, tag)
                results[tag] = (contents[-1] if last else contents[0]).strip() if contents else None
        return SimpleNamespace(**results)
