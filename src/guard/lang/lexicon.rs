//! The lexicon: courtesy words, function words and their languages, written by hand from how
//! customers write; built into lookup tables once.

use std::collections::HashMap;

use crate::guard::lang::words::fold;
use crate::guard::lang::{Entry, LANGUAGES, Role, SUPPORTED};

/// Words that carry no evidence of a language (laughter is recognised by [`is_laughter`]).
pub(super) const NEUTRAL: &str = "ok okay okey oki okis okk k kk super top ciao chao info wifi whatsapp \
    wsp email mail link pdf a ah ahh oh eh ey hey mmm mm hmm uf uff buf pff wow guau ups oops \
    yay bravo ole olé parking";

/// The lexicon: languages (with relative weights when a word leans to one, e.g. "es:3 ca:1"),
/// role, and words in lower case with their accents. "a_b" is a two-word formula. Words shared
/// by several served languages list all of them, so they do not push the reading to any one.
pub(super) const LEXICON: &[(&str, Role, &str)] = &[
    // Spanish.
    (
        "es",
        Role::Courtesy,
        "buenas buenos buen bueno buena gracias grasias grax muchas muchísimas vale venga porfa \
         porfis xfa xfavor perfecto perfecta estupendo estupenda dale adiós saludos saludo \
         hasta luego guapa guapo igualmente encantado tranqui noches noche vaya disculpa \
         disculpe perdona perdone perdón besos besitos navidad buen_día buenos_días \
         buenas_tardes buenas_noches de_acuerdo un_saludo hasta_luego hasta_mañana \
         muchas_gracias mil_gracias feliz_navidad qué_tal",
    ),
    ("es:3 ca:1", Role::Courtesy, "hola holi holis holaa"),
    ("es pt", Role::Courtesy, "claro entendido de_nada por_favor"),
    ("pt es", Role::Courtesy, "ola"),
    (
        "es",
        Role::Content,
        "los las unos unas y pero cuando cuándo cuanto cuánto cuanta cuánta cuantas cuántas \
         cuantos cuántos cuál cual cuales dónde donde quién quien qué xq tmb también hay tiene \
         tienen tengo tenemos tienes hace hacer hacemos puedo puede puedes pueden podría \
         podríamos podéis quiero quieres queremos quisiera estoy estás están soy ya yo mis sus \
         muy mucho mucha más allí ahí ahora hoy ayer mañana después temprano lunes martes \
         miércoles jueves viernes llego llegamos llegar voy verlo llamar llamo llamada \
         llámame escribir escribo escríbeme sigue siguen todavía aún lejos precio alquiler \
         alquilar pisos habitación habitaciones baño baños cocina terraza garaje trastero \
         fianza nómina llaves ubicación dirección anuncio inmueble vivienda ático gastos \
         comunidad mascotas perro perros amueblado barato barrio venta cita firmar firmamos \
         puerta siento interesa interesado interesada mejor ningún ninguna alguien usted \
         ustedes vosotros contestáis mandáis pasas viene vienes lo_siento ibi casero nos_vemos \
         cuesta cuestan más_info mas_info eres palabra palabras empezando empezar empieza \
         repite repetir dime dame instrucciones",
    ),
    ("es:4 pt:1", Role::Content, "piso"),
    ("es:2 pt:1", Role::Content, "q"),
    ("es:2 pt:1 ca:1", Role::Content, "esta"),
    ("es:2 ca:1 de:1", Role::Content, "es"),
    ("es:3 fr:1", Role::Content, "y"),
    ("pt:2 es:1", Role::Content, "consigo preciso"),
    (
        "es pt",
        Role::Content,
        "por para porque pq tb como cómo podemos necesito necesitamos busco buscamos está \
         estamos somos ser nos os mas menos algo nada todo antes tarde tardes semana horas \
         domingo sábado vamos ir ver mandar mando mandas contrato gato vender apartamento \
         feliz dias días sobre vi esperar",
    ),
    (
        "es pt ca",
        Role::Content,
        "aquí aqui hora dia día cerca hipoteca fotos foto visitar enviar comprar oferta marcar \
         espera",
    ),
    ("es ca", Role::Content, "el ascensor mes"),
    ("es it", Role::Content, "lo mi su con poco uno viene"),
    ("es fr", Role::Content, "bien libre chalet"),
    ("es fr ca", Role::Content, "en disponible son venir les"),
    ("es it ca", Role::Content, "del al una"),
    ("es fr it", Role::Content, "le"),
    ("es it pt", Role::Content, "caro centro momento italiano"),
    ("es en", Role::Content, "he"),
    ("es fr ca it", Role::Content, "un"),
    ("es it ca fr", Role::Courtesy, "si sí genial"),
    ("es pt it ca", Role::Content, "casa visita o"),
    ("es pt fr it ca", Role::Content, "de me te se tu"),
    ("es fr it ca", Role::Content, "la"),
    ("es pt it", Role::Content, "da"),
    // English.
    (
        "en",
        Role::Courtesy,
        "hi hello hiya thanks thank thx ty tks tnx cheers please pls plz bye goodbye morning \
         evening afternoon night great perfect sure yes yeah yep yup nope sorry fine cool \
         awesome welcome brilliant lovely thank_you good_morning good_evening good_afternoon \
         good_night see_you no_worries all_good hi_there ok_thanks",
    ),
    (
        "en",
        Role::Content,
        "the and or is are was were be been it its it's i'm im i'll i've i'd you you're your u \
         ur we we're we'd we'll our they them this that these those what what's whats when \
         where how which who why can could would will should don't dont can't cant won't \
         didn't doesn't isn't aren't does did have has had get got there here some any many \
         much more still also just not anymore about with without for of from at by my she \
         his her him if than then now today tomorrow tonight yesterday week late early \
         outside inside flat apartment house rent price bedroom bedrooms bathroom bathrooms \
         bed beds pets allowed furnished deposit bills include included viewing view visit \
         offer sign location send call looking look buy sell beach near budget around \
         interested available speak english make like let check wife husband boiler broken \
         running photos pictures kitchen cost costs good nice time see want need know right \
         minutes instead 's 'm 're 'll 've 'd 't there's let's that's",
    ),
    ("en:4 ca:1", Role::Content, "i us"),
    ("en:3 pt:1", Role::Content, "to do"),
    ("en:2 de:1 it:1", Role::Content, "so"),
    ("en de it", Role::Content, "in"),
    ("en de", Role::Content, "an am"),
    ("en fr ca", Role::Content, "on"),
    ("en pt", Role::Content, "as"),
    ("en it", Role::Content, "come"),
    ("en fr", Role::Courtesy, "pardon"),
    // Portuguese.
    (
        "pt",
        Role::Courtesy,
        "olá oi oie obrigado obrigada obg obgd brigado brigada valeu blz beleza tchau bom boa \
         boas noite perfeito ótimo otimo show beijos abraço abraços combinado tá_bom tudo_bem \
         bom_dia boa_tarde boa_noite muito_obrigado muito_obrigada com_certeza",
    ),
    ("pt it", Role::Courtesy, "certo salve certamente"),
    (
        "pt",
        Role::Content,
        "você voce vc vcs vocês não nao sim tem têm tenho temos ainda disponível quero queremos \
         gostaria pode podem fica onde quantos quantas quais mais muito muita muitos muitas \
         também agora amanhã hoje ontem então isso esse essa eu ele ela nós né pra pro com na \
         nas um uma ao aos é estou tô tá vou vai chegando chegar chego aluguel aluguer garagem \
         varanda animais imóvel agendar fala falar português informações informação tudo bem \
         mas_não quanto_é custa custam",
    ),
    ("pt:3 it:1", Role::Content, "quarto quartos"),
    ("pt it", Role::Content, "posso quanto quando e interesse"),
    ("pt ca", Role::Content, "qual em"),
    ("pt fr", Role::Content, "à"),
    ("pt de", Role::Content, "das"),
    ("es pt ca", Role::Content, "dos"),
    ("es pt fr ca", Role::Content, "que"),
    ("pt it ca", Role::Content, "interessa"),
    // French.
    (
        "fr",
        Role::Courtesy,
        "bonjour bonsoir salut merci coucou oui ouais d'accord parfait désolé désolée excusez \
         bisous cordialement volontiers svp stp merci_beaucoup au_revoir à_bientôt \
         avec_plaisir bien_sûr bonne_journée bonne_soirée",
    ),
    (
        "fr",
        Role::Content,
        "je j' j'ai suis est c'est c' vous nous pas des du une avec pour dans sur ce cette ces \
         ça mais très bonne demain aujourd'hui appartement maison loyer visiter toujours \
         combien parlez français quel quelle quand où ou peut peux pouvez qu' intéressé \
         intéressée au aux voir elle chambre chambres salle soir s'il plaît coûte coûtent",
    ),
    ("fr:3 ca:1", Role::Courtesy, "merci"),
    ("fr it", Role::Content, "il non parle qui"),
    ("fr:2 it:1", Role::Content, "visite"),
    ("fr it ca", Role::Content, "l' d' s'"),
    ("fr ca", Role::Content, "m' t' n' et"),
    // German.
    (
        "de",
        Role::Courtesy,
        "hallo servus moin danke dank vielen schönen bitte nein tschüss tschüs genau gerne \
         perfekt prima klar guten_tag guten_morgen guten_abend vielen_dank danke_schön \
         alles_klar bis_morgen bis_dann",
    ),
    ("de:3 ca:1", Role::Courtesy, "ja"),
    (
        "de",
        Role::Content,
        "ich du sie wir ihr ist sind bin die der und nicht noch frei wohnung miete wie viel \
         kostet können kann wann wo später komme kommen sprechen deutsch mit für auf eine ein \
         einen einem gibt haben habe hat morgen heute zimmer balkon haus besichtigen \
         besichtigung termin zu im mir mich dich uns euch schon auch aber oder wenn dann ob bei \
         nach von vom zum zur über gut gute",
    ),
    ("de pt", Role::Content, "um"),
    // Italian.
    (
        "it",
        Role::Courtesy,
        "buongiorno buonasera buonanotte grazie prego perfetto va_bene grazie_mille a_presto \
         a_domani buona_giornata buona_serata benissimo ottimo bene scusa scusi arrivederci \
         d'accordo volentieri",
    ),
    (
        "it",
        Role::Content,
        "gli di della delle dei degli dello nel nella che è sono sei siamo ho hai abbiamo \
         ancora disponibile affitto quante quanti vederlo vedere domani oggi interessato \
         interessata appartamento camera camere bagno dove anche molto tutto adesso allora \
         all' dell' un' nell' quest' c'è mille costano",
    ),
    ("it ca", Role::Content, "per costa però"),
    // Catalan.
    (
        "ca",
        Role::Courtesy,
        "bona bones gràcies moltes perfecte adéu adeu sisplau val vinga entesos bon_dia \
         bona_tarda bona_nit moltes_gràcies fins_ara fins_demà molt_bé d'acord",
    ),
    ("ca fr", Role::Courtesy, "bon"),
    (
        "ca",
        Role::Content,
        "els amb què perquè també molt molta més està estic és són sóc tinc teniu tenen vull \
         volem puc podeu podem pot fer veure demà avui ahir aquest aquesta això allò quan \
         quant quants quantes pis lloguer habitació habitacions preu carrer ens setmana \
         dilluns dimarts dimecres dijous divendres dissabte diumenge tarda vostè vosaltres \
         hi_ha fins",
    ),
];

/// Builds the exact and accent-free lookup tables from [`LEXICON`] and [`NEUTRAL`]. A spelling
/// listed under several languages merges their weights.
pub(super) fn build_lexicon() -> (HashMap<String, Entry>, HashMap<String, Entry>) {
    let mut exact: HashMap<String, Entry> = HashMap::new();
    let mut folded: HashMap<String, Entry> = HashMap::new();
    let neutral = Entry {
        weights: [0.0; LANGUAGES],
        role: Role::Neutral,
    };
    for word in NEUTRAL.split_whitespace() {
        exact.insert(word.to_string(), neutral);
        folded.insert(fold(word), neutral);
    }
    for (languages, role, words) in LEXICON {
        let mut weights = [0.0; LANGUAGES];
        for language in languages.split_whitespace() {
            let (code, weight) = match language.split_once(':') {
                Some((code, weight)) => (code, weight.parse::<f64>().unwrap_or(1.0)),
                None => (language, 1.0),
            };
            if let Some(index) = SUPPORTED.iter().position(|supported| *supported == code) {
                weights[index] = weight;
            }
        }
        let total: f64 = weights.iter().sum();
        let entry = Entry {
            weights: weights.map(|weight| weight / total),
            role: *role,
        };
        for word in words.split_whitespace() {
            merge(&mut exact, word.to_string(), entry);
            merge(&mut folded, fold(word), entry);
        }
    }
    (exact, folded)
}

/// Adds `entry` to `table` under `word`, averaging the weights with any entry already there; the
/// merged word is a courtesy word only if both are.
pub(super) fn merge(table: &mut HashMap<String, Entry>, word: String, entry: Entry) {
    match table.get_mut(&word) {
        None => {
            table.insert(word, entry);
        }
        Some(existing) if existing.role == Role::Neutral => {}
        Some(existing) => {
            for (weight, added) in existing.weights.iter_mut().zip(entry.weights) {
                *weight = (*weight + added) / 2.0;
            }
            if entry.role == Role::Content {
                existing.role = Role::Content;
            }
        }
    }
}
