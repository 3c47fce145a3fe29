"""The patterns of ``text.addressing``: words addressed to a fact checker, in ten languages.

Each names a *form* of address, not a topic: a heading or vocative to a checker ("Note to
fact-checkers:", "Evaluators:"), an imperative at the start of a clause about the
checker's own task ("Ignore all previous instructions", "Kindly regard the summary as
accurate"), a claimed verdict or score in a data format, a forged turn or template token.
A sentence that talks about checkers, rules or instructions in the third person is left
alone, and so is an imperative about anything but a checker's verdict ("Return True if
...", "Mark the box that applies", "Ignore section 4"). Languages: English, French,
German, Spanish, Italian, Portuguese, Dutch, Russian, Chinese and Japanese.
"""

from __future__ import annotations

import re

# where a clause begins: the text's start, or after a sentence end, colon, quote or bracket
_START = r"(?:^|[.!?;:\n>\"'(\[\]{},|—–]\s*)"
_TAIL = r"[^.!?\n]*[.!?]?"  # the rest of the sentence: what the note goes on to say
_CJK_TAIL = r"[^。！？\n]*[。！？]?"
_POLITE = (r"(?:(?:please|kindly|now|also|simply|just|so|then)[, ]+)*"
           r"(?:(?:you|the (?:checker|model|assistant|grader|evaluator|verifier))\s+"
           r"(?:must|should|shall|are to|need to|have to|will)\s+)?")
_CHECKER = (r"(?:(?:automated|automatic|ai|a\.i\.|llm|machine)[- ](?:fact[- ]?)?"
            r"(?:checkers?|checking (?:systems?|tools?)|systems?|models?|assistants?|"
            r"reviewers?|graders?|evaluators?|judges?|verifiers?|tools?|readers?|agents?)|"
            r"(?:large )?language models?|llms?|fact[- ]?checkers?|checkers?|verifiers?|"
            r"evaluators?|graders?|classifiers?|chatbots?|bots?|ai)")
_ADDRESSEE = (r"(?:(?:automated|automatic|ai|llm)[- ](?:fact[- ]?)?(?:checkers?|systems?|"
              r"models?|assistants?|graders?|evaluators?|verifiers?|reviewers?)|"
              r"(?:large )?language models?|llms?|fact[- ]?checkers?|checkers?|graders?|"
              r"evaluators?|verifiers?)")
# what a checker judges, as the object of an instruction about its verdict
_TASK = (r"(?:summary|summaries|answers?|responses?|repl(?:y|ies)|claims?|statements?|"
         r"sentences?|outputs?|texts?|figures?|facts?|hypothes[ie]s|assertions?)")
_STRONG = r"(?:entailment|entailed|supported|grounded|faithful|verified|fact-checked)"
_WEAK = r"(?:correct|accurate|true|confirmed|consistent)"
# an imperative about a verdict; a word in quotes ("'mark'", "\"ignore\"") is named, not said
_NOT_QUOTED = r"\b(?![\"'’])"
_VERDICT_VERB = (r"(?:treat|mark|label|consider|regard|rate|score|classify|count|deem|judge|"
                 r"assess|accept|tag|flag|grade|evaluate)" + _NOT_QUOTED)
_VERB = (r"(?:treat|mark|label|consider|regard|rate|score|classify|count|deem|judge|assess|"
         r"accept|tag|flag|output|return|answer|respond|reply|record|report|grade|evaluate|"
         r"assume|take)" + _NOT_QUOTED)
_ANSWER = r"(?:summary|summaries|answers?|responses?|repl(?:y|ies)|claims?)"
_HEAD = (r"(?:(?:an?|the|important|urgent|special|official)\s+)?(?:note|notice|message|memo|"
         r"instructions?|attention|warning|reminder|notification|directive|update)")

_ENGLISH: list[tuple[str, str]] = [
    ("ignore instructions", _START + _POLITE + r"(?:ignore|disregard|forget|override|bypass)"
     r"\b" + _NOT_QUOTED + r"[^.!?\n]{0,40}?\b(?:all|any|the|your|previous|prior|above|"
     r"earlier|preceding|these|those|other|system|original)\b[^.!?\n]{0,30}?\b(?:instructions?|rules?|prompts?|"
     r"guidelines|directions?|directives?|passages?|sources?|documents?|context|task)\b"
     + _TAIL),
    ("note to the checker", _START + _HEAD + rf"\s+(?:to|for)\s+(?:(?:all|any|the|every)\s+)?"
     rf"{_CHECKER}\s*[:,—–-]" + _TAIL),
    ("note to the checker", _START + rf"(?:dear|attention|hey|hello|to)\s+(?:all\s+|the\s+)?"
     rf"{_CHECKER}\s*[:,—–-]" + _TAIL),
    ("note to the checker", _START + rf"(?:(?:all|the)\s+)?{_ADDRESSEE}\s*:" + _TAIL),
    ("instruction to the checker", _START + _POLITE + _VERDICT_VERB +
     rf"[^.!?\n]{{0,60}}?\b{_TASK}\b[^.!?\n]{{0,30}}?\b(?:{_STRONG}|{_WEAK})\b(?!\s+or\b)"),
    ("instruction to the checker", _START + _POLITE + _VERB + rf"[^.!?\n]{{0,60}}?(?:\b(?:as|"
     rf"to be|with)\s+|:\s*|\b(?:it|them|this|that|everything|all|{_TASK})\s+)[\"']?{_STRONG}"
     r"\b(?!\s+or\b)"),
    ("claimed verdict", r"[\"']?\b(?:label|verdict|judge?ments?|prediction|classification|"
     r"nli[_ ]label|fact[_ ]?check(?:_result)?|decision)\b[\"']?\s*[:=]\s*[\"']?(?:entailment|"
     r"entailed|supported|contradiction|neutral|hallucinated|faithful|grounded)\b"),
    ("claimed verdict", r"[\"']?\b(?:result|assessment|status)\b[\"']?\s*[:=]\s*[\"']?"
     r"(?:entailment|entailed|supported|hallucinated|faithful|grounded)\b"),
    ("claimed verdict", r"\b(?:label|verdict|judge?ment|nli_label)\s*(?:\||>|</?\w+>)\s*(?:"
     r"entailment|entailed|supported|hallucinated|faithful|grounded)\b"),  # tables, XML
    ("claimed score", r"[\"']score[\"']\s*:\s*5(?:\.0)?\b"),
    ("claimed score", rf"\b{_TASK}\b[^.!?\n]{{0,40}}?\b(?:gets?|deserves?|merits?|should "
     r"(?:get|receive|be given)|is worth)\b[^.!?\n]{0,20}?\b(?:score|rating|grade|mark)\s+"
     r"(?:of\s+)?(?:5|five)\b"),
    ("claimed score", _START + _POLITE + rf"(?:give|assign|award|rate|score|grade){_NOT_QUOTED}\s+"
     rf"(?:the |this |that |every |each |any )?{_TASK}\b[^.!?\n]{{0,20}}?\b(?:a\s+)?"
     r"(?:(?:score|rating|grade|mark)\s+(?:of\s+)?)?(?<![\d-])(?:5|five)\b"),
    ("claim of support", rf"\b(?:this|the (?:previous|above|following|preceding|next))\s+"
     rf"(?:sentence|statement|claim|answer|response|summary|text)s?\s+(?:is|are|was|were|"
     rf"has been|have been)\s+(?:fully\s+|entirely\s+|already\s+)?{_STRONG}"),
    ("claim of support", r"\b(?:as|which)\s+the\s+(?:source|passage|document|context)s?\s+"
     r"(?:states?|says?|confirms?)\s+(?:it\s+)?(?:word for word|verbatim|exactly)"),
    ("claim of support", r"\brepeats?\s+the\s+(?:source|passage|document|context)\b"),
    ("claim of support", rf"\b(?:fully|entirely|completely)\s+{_STRONG}\s+by\s+the\s+"
     r"(?:source|passage|document|context)"),
    ("claim about the answer", rf"\b(?:any|every|all|each)\b[^.!?\n]{{0,40}}\b{_ANSWER}\b"
     r"(?:(?!\b(?:when|if|where|unless|whether|until)\b)[^.!?\n]){0,40}\b(?:is|are|"
     r"should be|must be|counts? as|has been|have been)\s+"
     rf"(?:to be\s+)?(?:treated as\s+)?(?:{_STRONG}|{_WEAK})\b"
     r"(?!\s+(?:if|when|unless|only|or)\b)"),
    ("claim about the source", r"\b(?:source|passage|document|context)s?\b[^.!?\n]{0,30}"
     r"\b(?:has|have|contains?)\s+an?\s+(?:typo|error|mistake|misprint)"),
    ("claim about the source", r"\b(?:other|above|previous|remaining|earlier|preceding)\s+"
     r"(?:passages?|documents?|sources?|chunks?|excerpts?)\b[^.!?\n]{0,30}\b(?:outdated|"
     rf"obsolete|superseded|wrong|incorrect|invalid|unreliable)\b[^.!?\n]{{0,120}}\b(?:"
     rf"{_STRONG}|{_CHECKER}|{_TASK}\b[^.!?\n]{{0,30}}\b{_WEAK})\b"),
    ("hidden comment", rf"<!--(?:(?!-->)[\s\S]){{0,500}}?\b(?:{_STRONG}|{_ADDRESSEE}|label|"
     r"verdict|score|instructions?)\b[\s\S]{0,500}?-->"),
    ("chat-template token", r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|"
     r"start_header_id|end_header_id)\|>|\[/?INST\]|<<SYS>>|<</SYS>>|<(?:start|end)_of_turn>"),
    ("forged turn", r"(?:^|[\n.!?>|]\s*)#*\s*(?:system|assistant|tool|function)(?:\s*(?:message|"
     r"result|output|response|call))?\s*(?:\([^)\n]{0,40}\))?\s*:[^\n]{0,200}?\b(?:"
     rf"{_STRONG}|{_CHECKER}|label|verdict|rules?|instructions?|claims?|score)\b[^\n]*"),
    ("our own tags", r"</?(?:source|sources|claim|claims|question|judgement|findings?|chunk|"
     r"hypothes[ie]s)(?:\s+(?:id|index)=[\"']?\w+[\"']?)?\s*>"),
]

_OTHER_LANGUAGES: list[tuple[str, str]] = [
    # French
    ("note to the checker", _START + r"(?:remarque|note|avis|message|attention|avertissement|"
     r"consigne)s?\s+(?:pour|aux|à|a)\s+(?:l'attention\s+(?:des?|du)\s+)?(?:les\s+)?(?:"
     r"systèmes?\s+d['’](?:ia|intelligence artificielle)|ia|modèles?\s+(?:de langage|d['’]ia)|"
     r"vérificateurs?(?:\s+automatiques?)?|correcteurs?(?:\s+automatiques?)?|évaluateurs?|"
     r"outils?\s+de\s+vérification|assistants?\s+(?:d['’]ia|ia))\s*[:,—–-]" + _TAIL),
    ("ignore instructions", _START + r"(?:veuillez\s+)?(?:ignorez|ignore|ignorer|oubliez|"
     r"oublie|négligez)\b" + _NOT_QUOTED
     + r"[^.!?\n]{0,40}?\b(?:instructions?|consignes?|règles?|passages?|"
     r"sources?|documents?|indications?)\b" + _TAIL),
    ("instruction to the checker", _START + r"(?:veuillez\s+)?(?:considérez|considérer|"
     r"traitez|traiter|jugez|juger|marquez|marquer|étiquetez|étiqueter|notez|noter|classez|"
     r"classer|tenez)\b[^.!?\n]{0,60}?\b(?:réponse|résumé|affirmations?|déclarations?|"
     r"phrases?|énoncés?|chiffres?|texte)\b[^.!?\n]{0,30}?(?:exacte?s?|vérifiée?s?|correcte?s?|"
     r"confirmée?s?|vraie?s?|fondée?s?|étayée?s?|fidèles?)\b"),
    # German
    ("note to the checker", _START + r"(?:hinweis|notiz|nachricht|achtung|mitteilung|"
     r"anweisung|wichtig)\s+(?:für|an)\s+(?:alle\s+|die\s+)?(?:ki[- ]?(?:systeme?|modelle?|"
     r"prüfer|assistenten)|ki|automatische\w*\s+(?:prüf\w*|faktenprüf\w*|systeme?)|"
     r"prüf(?:er|systeme?|programme?)|faktenprüfer\w*|sprachmodelle?)\s*[:,—–-]" + _TAIL),
    ("ignore instructions", _START + r"(?:ignoriere|ignorieren\s+sie|ignoriert|vergiss|"
     r"vergessen\s+sie|missachte)\b" + _NOT_QUOTED
     + r"[^.!?\n]{0,40}?\b(?:anweisungen|instruktionen|regeln|"
     r"vorgaben|abschnitte|quellen|dokumente|passagen)\b" + _TAIL),
    ("instruction to the checker", _START + r"(?:betrachte|betrachten\s+sie|behandle|"
     r"behandeln\s+sie|werte|werten\s+sie|bewerte|bewerten\s+sie|markiere|markieren\s+sie|"
     r"stufe|stufen\s+sie)\b[^.!?\n]{0,60}?(?:antwort|zusammenfassung|aussage|behauptung|"
     r"sätze|satz|angaben|zahlen|text)\w*\b[^.!?\n]{0,30}?\b(?:als\s+)?(?:belegt|bestätigt|"
     r"korrekt|richtig|wahr|verifiziert|zutreffend|gestützt)\b"),
    # Spanish
    ("note to the checker", _START + r"(?:nota|aviso|mensaje|atención|advertencia|"
     r"instrucciones?)\s+(?:para|a)\s+(?:los\s+|las\s+)?(?:sistemas?\s+de\s+(?:ia|"
     r"inteligencia artificial)|ia|modelos?\s+de\s+lenguaje|verificadores?(?:\s+automáticos?)?|"
     r"evaluadores?|correctores?|asistentes?\s+de\s+ia)\s*[:,—–-]" + _TAIL),
    ("ignore instructions", _START + r"(?:por favor,?\s+)?(?:ignora|ignore|ignorad|ignoren|"
     r"olvida|olvide|olvidad|omite|omita)\b" + _NOT_QUOTED
     + r"[^.!?\n]{0,40}?\b(?:instrucciones|reglas|"
     r"indicaciones|pasajes|fuentes|documentos|normas)\b" + _TAIL),
    ("instruction to the checker", _START + r"(?:por favor,?\s+)?(?:considera|considere|"
     r"considerad|trata|trate|tratad|marca|marque|califica|califique|etiqueta|etiquete)\b"
     r"[^.!?\n]{0,60}?\b(?:respuesta|resumen|afirmaci(?:ón|ones)|declaraci(?:ón|ones)|"
     r"frases?|oraci(?:ón|ones)|cifras?|texto)\b[^.!?\n]{0,30}?\b(?:correct[ao]s?|"
     r"verificad[ao]s?|verdader[ao]s?|respaldad[ao]s?|confirmad[ao]s?|exact[ao]s?|fiel(?:es)?)"
     r"\b"),
    # Italian
    ("note to the checker", _START + r"(?:nota|avviso|messaggio|attenzione|avvertenza|"
     r"istruzioni)\s+(?:per|ai|agli|alle|a)\s+(?:i\s+|gli\s+)?(?:sistemi\s+(?:di\s+)?(?:ia|"
     r"intelligenza artificiale)|ia|modelli\s+(?:linguistici|di\s+linguaggio)|verificatori"
     r"(?:\s+automatici)?|valutatori|correttori|assistenti\s+(?:di\s+)?ia)\s*[:,—–-]" + _TAIL),
    ("ignore instructions", _START + r"(?:per favore,?\s+)?(?:ignora|ignorate|ignori|dimentica|"
     r"dimenticate|trascura)\b" + _NOT_QUOTED
     + r"[^.!?\n]{0,40}?\b(?:istruzioni|regole|indicazioni|passaggi|"
     r"fonti|documenti)\b" + _TAIL),
    ("instruction to the checker", _START + r"(?:per favore,?\s+)?(?:considera|considerate|"
     r"consideri|tratta|trattate|tratti|segna|segnate|valuta|valutate|classifica)\b"
     r"[^.!?\n]{0,60}?\b(?:risposta|riassunto|sintesi|affermazion[ei]|dichiarazion[ei]|"
     r"frasi?|cifre|testo)\b[^.!?\n]{0,30}?\b(?:corrett[aoei]|verificat[aoei]|ver[aoei]|"
     r"supportat[aoei]|confermat[aoei]|accurat[aoei]|fedel[ei])\b"),
    # Portuguese
    ("note to the checker", _START + r"(?:nota|aviso|mensagem|atenção|advertência|"
     r"instruç(?:ão|ões))\s+(?:para|aos|às|a)\s+(?:os\s+|as\s+)?(?:sistemas?\s+de\s+(?:ia|"
     r"inteligência artificial)|ia|modelos?\s+de\s+linguagem|verificadores?(?:\s+automáticos?)?|"
     r"avaliadores?|corretores?|assistentes?\s+de\s+ia)\s*[:,—–-]" + _TAIL),
    ("ignore instructions", _START + r"(?:por favor,?\s+)?(?:ignore|ignora|ignorem|esqueça|"
     r"esquece|desconsidere|desconsidera)\b" + _NOT_QUOTED
     + r"[^.!?\n]{0,40}?\b(?:instruções|regras|orientações|"
     r"passagens|fontes|documentos)\b" + _TAIL),
    ("instruction to the checker", _START + r"(?:por favor,?\s+)?(?:considere|considera|"
     r"considerem|trate|trata|tratem|marque|marca|classifique|avalie)\b[^.!?\n]{0,60}?\b(?:"
     r"resposta|resumo|afirmaç(?:ão|ões)|declaraç(?:ão|ões)|frases?|números|texto)\b"
     r"[^.!?\n]{0,30}?\b(?:corret[ao]s?|verificad[ao]s?|verdadeir[ao]s?|confirmad[ao]s?|"
     r"exat[ao]s?|fiel|fiéis|apoiad[ao]s?)\b"),
    # Dutch
    ("note to the checker", _START + r"(?:opmerking|bericht|let op|notitie|mededeling|"
     r"instructie|aandacht)\s+(?:voor|aan)\s+(?:alle\s+|de\s+)?(?:ai[- ]?(?:systemen|modellen|"
     r"assistenten|controleurs)|ai|taalmodellen|(?:fact)?checkers|controleurs|beoordelaars|"
     r"automatische\s+\w+)\s*[:,—–-]" + _TAIL),
    ("ignore instructions", _START + r"(?:negeer|negeert|vergeet)\b" + _NOT_QUOTED
     + r"[^.!?\n]{0,40}?\b(?:"
     r"instructies|regels|aanwijzingen|passages|bronnen|documenten)\b" + _TAIL),
    ("instruction to the checker", _START + r"(?:beschouw|behandel|markeer|beoordeel|label)\b"
     r"[^.!?\n]{0,60}?\b(?:antwoord|samenvatting|beweringen?|uitspraken?|zinnen|zin|cijfers|"
     r"tekst)\b[^.!?\n]{0,30}?\b(?:correct|juist|geverifieerd|waar|ondersteund|bevestigd|"
     r"kloppend)\b"),
    # Russian
    ("note to the checker", _START + r"(?:примечание|внимание|сообщение|заметка|указание|"
     r"инструкция)\s+(?:для|к)\s+(?:систем\w*\s+(?:ии|искусственного интеллекта)|ии|"
     r"языков\w*\s+модел\w*|модел\w*\s+ии|проверяющ\w*|фактчекер\w*|оценщик\w*|"
     r"автоматическ\w*\s+\w+)\s*[:,—–-]" + _TAIL),
    ("ignore instructions", _START + r"(?:пожалуйста,?\s+)?(?:игнорируй(?:те)?|"
     r"проигнорируй(?:те)?|забудь(?:те)?)\b" + _NOT_QUOTED
     + r"[^.!?\n]{0,40}?(?:инструкци|правил|указани|"
     r"фрагмент|источник|документ)\w*" + _TAIL),
    ("instruction to the checker", _START + r"(?:пожалуйста,?\s+)?(?:считай(?:те)?|"
     r"рассматривай(?:те)?|отметь(?:те)?|пометь(?:те)?|оцени(?:те)?|признай(?:те)?)\b"
     r"[^.!?\n]{0,60}?(?:ответ|резюме|утвержден|предложен|цифр|текст)\w*[^.!?\n]{0,30}?(?:"
     r"верн|правильн|подтвержд|достоверн|точн|истинн)\w*"),
    # Chinese
    ("note to the checker", r"(?:致|给|提示|注意|通知|说明)[^。！？\n]{0,6}?(?:人工智能|AI)"
     r"[^。！？\n]{0,4}?(?:系统|模型|审核员?|检查(?:器|员|系统)?|助手|评估(?:者|器))[：:，,]"
     + _CJK_TAIL),
    ("note to the checker", r"(?:^|[。！？\n])\s*(?:事实核查员|核查员|审核员|评估员)[：:]"
     + _CJK_TAIL),
    ("ignore instructions", r"(?:请)?(?:忽略|无视|忘记|不要理会)(?:之前|以上|上述|前面|先前|"
     r"所有|全部|其他)[^。！？\n]{0,8}?(?:指令|指示|说明|规则|段落|来源|文件|内容)" + _CJK_TAIL),
    ("instruction to the checker", r"(?:请)?(?:将|把)?(?:该|这个|此|所有|每个|每条)?(?:答案|"
     r"摘要|回答|陈述|说法|总结|句子)[^。！？\n]{0,10}?(?:视为|当作|标记为|判定为|认定为|标为|"
     r"评为)[^。！？\n]{0,4}?(?:正确|准确|真实|已验证|已核实|蕴含|支持|有依据)"),
    ("claimed verdict", r"(?:标签|判定|结论)\s*[：:]\s*(?:蕴含|支持|正确)"),
    # Japanese
    ("note to the checker", r"(?:AI|人工知能)[^。！？\n]{0,6}?(?:システム|モデル|チェッカー|"
     r"検証|審査)[^。！？\n]{0,4}?(?:へ|に)(?:の)?(?:注意|お知らせ|メッセージ|指示|連絡)"
     + _CJK_TAIL),
    ("note to the checker", r"(?:^|[。！？\n])\s*(?:ファクトチェッカー|検証者|評価者)"
     r"(?:の皆様|各位)?(?:へ)?[：:]" + _CJK_TAIL),
    ("ignore instructions", r"(?:以前|上記|これまで|前|他|すべて)の[^。！？\n]{0,6}?(?:指示|"
     r"命令|ルール|規則|文書|情報源)を(?:すべて)?無視" + _CJK_TAIL),
    ("instruction to the checker", r"(?:回答|要約|主張|記述)[^。！？\n]{0,10}?を[^。！？\n]"
     r"{0,4}?(?:正しい|正確|真実|検証済み|裏付けあり|含意)(?:もの)?(?:と|として)(?:みなし|"
     r"扱|判定|評価|ラベル)"),
]

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (*_ENGLISH, *_OTHER_LANGUAGES))
