//! The consent reader's words: keywords, the messages' names, what else a customer cancels,
//! and the phrasings of stopping and of coming back, each over the folded words of
//! [`crate::agents::keywords::tokens`] joined by spaces.

use std::sync::LazyLock;

use regex::Regex;

/// Whole-message keywords, in the folded form of [`tokens`] joined by spaces.
pub(super) const OPT_OUT_WORDS: &[&str] = &[
    // es
    "baja",
    "de baja",
    "darme de baja",
    "dame de baja",
    "dadme de baja",
    "denme de baja",
    "me doy de baja",
    "quiero darme de baja",
    "parar",
    "stop",
    "cancelar suscripcion",
    "desuscribirme",
    "quiero desuscribirme",
    "darme de baja de todo",
    "no mas",
    "desactivar alertas",
    "quitame",
    "quitadme",
    "borrame",
    "borradme",
    "sacame",
    "sacadme",
    "paso quitame",
    // en
    "unsubscribe",
    "opt out",
    "optout",
    "remove me",
    "remove",
    "unsubscirbe",
    "unsuscribe",
    "unsubcribe",
    "unsubscibe",
    "unsubscribe me",
    "stop all",
    // pt
    "sair",
    "descadastrar",
    "pare",
    "parem",
    "parar mensagens",
    "cancelar inscricao",
    // ca, fr, it, de
    "baixa",
    "desabonner",
    "desabonnement",
    "aufhoren",
    "desinscrire",
    "arret",
    "disiscrivimi",
    "annulla iscrizione",
    "abmelden",
    "abbestellen",
    "stopp",
];

pub(super) const OPT_IN_WORDS: &[&str] = &[
    // es
    "alta",
    "de alta",
    "darme de alta",
    "dame de alta",
    "volver a recibir",
    "reanudar",
    // en
    "start",
    "subscribe",
    "opt in",
    "optin",
    "resume",
    "unstop",
    // pt
    "voltar",
    "voltar a receber",
    "reativar",
    // ca, fr, it, de
    "alta de nou",
    "alta de nuevo",
    "alta otra vez",
    "de alta otra vez",
    "suscribirme",
    "suscribirme otra vez",
    "suscribirme de nuevo",
    "volver a suscribirme",
    "apuntame otra vez",
    "apuntadme otra vez",
    "quiero darme de alta",
    "reabonner",
    "iscrivimi",
    "anmelden",
];

/// Words that may come with it without changing what it says.
pub(super) const COURTESY: &[&str] = &[
    "por",
    "favor",
    "porfa",
    "porfavor",
    "xfa",
    "plis",
    "please",
    "pls",
    "plz",
    "gracias",
    "thanks",
    "thank",
    "you",
    "obrigado",
    "obrigada",
    "ya",
    "ok",
    "vale",
    "hola",
    "hi",
    "hello",
    "ola",
    "oi",
    "oye",
    "bonjour",
    "cordialement",
    "cheers",
    "lol",
    "buenas",
    "buenos",
    "dias",
    "tardes",
    "noches",
    "bom",
    "dia",
    "boa",
    "tarde",
    "noite",
    "eh",
    "ah",
    "bueno",
    "pues",
    "mira",
    "hey",
    "ei",
    "en",
    "serio",
    "si",
    "us",
    "plau",
    "svp",
    "merci",
    "per",
    "favore",
    "bitte",
    "danke",
    "grazie",
];

/// Longest message read, in words past the courtesy: more says something else too.
pub(super) const MOST_WORDS: usize = 25;

/// Things a customer cancels that are not the messages themselves: a message naming one is
/// about it (a listing withdrawn, a visit cancelled, a saved search removed).
pub(super) const OTHER_THINGS: &[&str] = &[
    "anuncio",
    "anuncios",
    "piso",
    "pisos",
    "casa",
    "inmueble",
    "inmuebles",
    "propiedad",
    "vivienda",
    "atico",
    "local",
    "visita",
    "visitas",
    "cita",
    "citas",
    "oferta",
    "ofertas",
    "reserva",
    "contrato",
    "busqueda",
    "suscripcion",
    "listing",
    "listings",
    "ad",
    "advert",
    "flat",
    "flats",
    "houses",
    "properties",
    "homes",
    "apartment",
    "house",
    "viewing",
    "viewings",
    "appointment",
    "appointments",
    "offer",
    "offers",
    "booking",
    "search",
    "anuncio",
    "imovel",
    "apartamento",
    "apartamentos",
    "ape",
    "proposta",
    "visitas",
    "fotos",
    "photos",
    "llamadas",
    "llamarme",
    "llamar",
    "calls",
    "call",
    "ligar",
    "ligacoes",
    "email",
    "correo",
    "correos",
    "emails",
    "anunci",
    "pis",
    "alerta",
    "alert",
    "alerte",
    "annonce",
    "annuncio",
    "wohnung",
    "pdf",
    "documento",
    "documentos",
    "archivo",
    "plano",
    "planos",
    "enlace",
    "link",
    "ubicacion",
    "video",
    "videos",
    "audio",
    "audios",
    "propietario",
    "propietaria",
    "llames",
    "llameis",
    "llamen",
    "anrufe",
    "anrufen",
];

/// The messages themselves, however they are called.
pub(super) const MESSAGES: &str = "mensajes|mensaje|mensages|mensage|mensajito|comunicaciones|comunicacion|communications|communication|comunicacoes|comunicazioni|notificasiones|newsletter|mensajitos|msj|msjs|mensajeria|avisos|aviso|notificaciones|\
    notificacion|alertas|recordatorios|recordatorio|publicidad|promociones|novedades|whatsapps|\
    whatsapp|wasaps|wasap|spam|cosas|nada|messages|message|msgs|texts|text|notifications|alerts|\
    reminders|updates|promos|promotions|mensagens|mensagem|notificacoes|lembretes|promocoes|\
    publicidade|novidades|zaps|sms|missatges|missatge|notificacions|avisos|messaggi|messaggio|avvisi|\
    notifiche|nachrichten|nachricht|mitteilungen|benachrichtigungen|erinnerungen|rappels|\
    notifications|werbung|pubblicita|publicite";

/// Asking to stop: each pattern over the folded words, joined by spaces.
pub(super) static STOP: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    let m = MESSAGES;
    [
        // «ya no me mandes lo de las bajadas de precio ni nada»
        r"\bno (me |nos )?(mandes|mandeis|manden|envies|envieis|envien) .*\bni nada$".to_owned(),
        // «quita mis alertas, ya no busco»: every alert, not one
        r"\b(quita|quitad|quitame|quitadme|quitenme|borra|borrad|borrame|elimina|eliminad|desactiva|desactivad) (todas )?(mis|las|tus|vuestras|todas las) alertas( no busco.*)?$".to_owned(),
        // «que no, todos los días un mensajito»
        format!(r"\btodos los (dias )?(un|una) ({m})\b"),
        // «¿me puedes quitar de la lista?»
        r"\b(me|nos) (puedes|podeis|pueden|podrias|podriais|podrian) (quitar|sacar|borrar|eliminar|dar de baja) de (la|vuestra|tu|su|esta) (lista|difusion)\b".to_owned(),
        r"\b(take|get) me off( (it|this|that|the list|your list))?$".to_owned(),
        format!(r"\bstop (the |these |your |all )?([a-z]+ ){{0,2}}({m})\b"),
        r"^(stop|basta|para|parad|pare)\b.*\b(harassment|spam|acoso|pesados|pesadas|pesado)\b".to_owned(),
        r"\b(rather not|prefer not to) (get|receive) (these|them|those|any more|messages|this)\b".to_owned(),
        format!(r"\bcease (all )?(further )?({m}|contact)\b"),
        r"\bmute (me|this|these|the messages|the notifications)\b".to_owned(),
        format!(r"\b(way )?too many ({m})\b"),
        format!(r"\bparar com (as |os |essas |esses )?({m})\b"),
        format!(r"\bprou (de )?({m})\b"),
        r"\bme (retirer|supprimer|desinscrire|enlever|radier) (de|d) (votre |la |vos )?(liste|listes|fichier)\b".to_owned(),
        r"\b(horen sie auf|hor auf) mir .*zu (schreiben|schicken|senden)\b".to_owned(),
        format!(r"\b(stop|para|parad|basta) con (los |las |el |la |tus |vuestros |the )?({m})\b"),
        r"^stop no (me )?(mandes|mandeis|manden|envies|envieis|envien)( more| mas)? (listings|pisos|anuncios|nada|cosas)$".to_owned(),
        r"\b(unsubscirbe|unsuscribe|unsubcribe|unsubscibe)( me)?\b".to_owned(),
        // es: «no me mandéis más (mensajes)», «no nos escribáis más»
        format!(
            r"\b(no|ni) (me |nos |le |les )?(los |las )?(avisen|aviseis|avises|avise|enviaran|mandaran|escribieran|enviarais|mandarais|mandeis|mandes|manden|mande|envieis|envies|envien|envie|escribais|escribas|escriban|escriba|molesteis|molestes|molesten|moleste|mandar|enviar|escribir|mandarme|enviarme|escribirme|contactarme) (nunca )?(mas|ningun|ninguna)\b( ({m}))?"
        ),
        format!(r"\bno (me |nos )?(mandeis|mandes|manden|envieis|envies|envien) (mas )?({m})\b"),
        // «dejad de escribirme», «dejen de mandarme avisos»
        r"\b(dejad|deja|dejen|deje|dejar|dejeis|parad|para|paren|pare|basta|dejaran|dejen|dejasen|dejarais) (de|d) (enbiarme|escribirme|escribirnos|mandarme|mandarnos|enviarme|enviarnos|enviarle|enviarles|mandarle|mandarles|escribirle|escribirles|avisarme|contactarme|contactarnos|molestarme|molestarnos|spamearme|mandar|enviar|escribir)\b".to_owned(),
        // «no quiero (recibir) más mensajes», «ya no quiero avisos»
        format!(r"\bno (quiero|kiero|qiero|queremos|deseo|deseamos|quiere|quieren) (recibir |resivir |recivir |que me (lleguen|mandeis|envieis|escribais) )?(mas |ningun |ningunos |ninguna |ningunas |vuestros |vuestras |sus |los |las |estos |estas )*({m})\b"),
        format!(r"\bno (quiero|queremos|deseo) (recibir )?(nada )?mas\b( ({m}))?$"),
        r"\bno (quiero|queremos|deseo) que me (escribais|escriban|escribas|mandeis|manden|envieis|envien|contacteis|contacten)\b".to_owned(),
        format!(r"\bno mas ({m})\b"),
        format!(r"\bbasta (de|con|ya de) ({m})\b"),
        // «borradme de la lista», «sacadme de los avisos», «dadme de baja de los mensajes»
        r"\b(borrame|borradme|borrenme|sacame|sacadme|saquenme|quitame|quitadme|quitenme|eliminame|eliminadme|eliminenme|dame|dadme|denme|darme|me doy) (de baja )?de (la|vuestra|tu|su|esta) (lista|difusion)".to_owned(),
        format!(r"\b(borrame|borradme|borrenme|sacame|sacadme|saquenme|quitame|quitadme|quitenme|eliminame|eliminadme|eliminenme) de (los |las |vuestros |vuestras |tus |sus |estos |estas )?({m})\b"),
        r"\b(desuscribirme|desuscribidme|desuscribanme|desuscribeme|me desuscribo)\b".to_owned(),
        format!(r"\bno (me |nos )?(lleguen|llegue|lleguan) (mas )?({m})\b"),
        // «no me mandéis ofertas»: the agency's, not one the customer made
        r"\bno (me |nos )?(mandeis|mandes|manden|envieis|envies|envien) (mas )?(ofertas|promociones|offers)\b".to_owned(),
        format!(r"\b(dame|dadme|denme|darme|me doy|quiero darme) de baja de (los |las |tus |vuestros |vuestras |sus |estos |estas )?({m})\b"),
        // en
        format!(r"\bstop (sending|messaging|texting|contacting|spamming|writing)( (to )?(me|us))?\b( (any )?(more )?({m}))?"),
        format!(r"\bstop (the |these |your |all )?({m})\b"),
        r"\b(don t|dont|do not|never) (send|message|text|contact|write to|write) (me|us)( (any|anything|more|again|anymore|any more|these|those|your)\b)*".to_owned(),
        format!(r"\b(don t|dont|do not) want (to (receive|get) )?(any |more |these |your |any more )*({m})\b"),
        format!(r"\bno more ({m})\b"),
        r"\b(unsubscribe|remove|delete|take) (me )?(off |from )(the |your |this )?(list|mailing list|contact list|messages|alerts)\b".to_owned(),
        r"\b(unsubscribe me|opt me out|i want to unsubscribe|i want to opt out)\b".to_owned(),
        // pt
        format!(r"\b(pare|parem|para|parar|deixe|deixem|deixa) de (me |nos )?(mandar|enviar|escrever|mandarem|enviarem)\b( ({m}))?"),
        format!(r"\bnao (me |nos )?(mande|mandem|envie|enviem|escreva|escrevam|manda|envia) (mais|nunca mais)\b( ({m}))?"),
        format!(r"\bnao (me |nos )?(mande|mandem|envie|enviem) (mais )?({m})\b"),
        format!(r"\bnao quero (mais )?(receber )?(mais )?(nenhuma |nenhum |essas |esses |as |os |suas |seus )*({m})\b"),
        r"\b(quero sair|me tira|me tirem|me remova|me removam|me tire) da (lista|sua lista)\b".to_owned(),
        // «quiero dejar de recibir…», «I want to stop receiving…», «quero deixar de receber…»
        r"\b(dejar de recibir|dejar de recibirlos|stop receiving|stop getting|deixar de receber)\b".to_owned(),
        // «desactivad los avisos», «cancelad los mensajes», «turn off the notifications»
        r"\b(desactivar|desactiva|desactivad|desactiven|cancelar|cancela|cancelad|cancelen|anula|anulad|anular|turn off|switch off|cancel|desativar|desative|desativem|cancelem) (los |las |the |all |my |as |os |todos los |todas las |all the )?(mensajes|avisos|notificaciones|recordatorios|alertas|messages|notifications|reminders|alerts|mensagens|notificacoes|lembretes)\b".to_owned(),
        // «¿me dais de baja?», «me quiero dar de baja»
        r"\b(me|nos) (dais|das|dan|da|podeis dar|puedes dar|pueden dar|podrias dar) de baja\b".to_owned(),
        r"\b(me quiero dar|quiero darme|me puedo dar|puedo darme) de baja\b".to_owned(),
        r"\b(no longer want|dont want|don t want|do not want) to (receive|get|hear from)\b".to_owned(),
        r"\bleave me alone\b".to_owned(),
        format!(r"\b(chega|basta) de ({m})\b"),
        r"\b(me tira|me tirem|me tire|me remova|me removam|tirem me|me tira ai) (da|dessa|desta|de sua) lista\b".to_owned(),
        // «no me escribáis», «no me contactéis» (the person is their object)
        r"\b(no|ni) (me|nos) (escribais|escribas|escriban|escriba|molesteis|molestes|molesten|contacteis|contactes|contacten|contactes)\b".to_owned(),
        format!(r"\b(no|ni) (me|nos) (mandeis|mandes|manden|envieis|envies|envien)( ({m}))?$"),
        r"\b(no|nunca) (contactarme|contactar|escribirme|molestarme)\b".to_owned(),
        r"\b(borrad|borra|borren|eliminad|elimina|eliminen|quitad|quita|quiten) (mi numero|mi telefono|mis datos|mi contacto)\b".to_owned(),
        format!(r"\bno (necesito|necesitamos) (mas )?({m})\b"),
        r"\b(dejad|deja|dejen|dejar) de molestar\b".to_owned(),
        r"\bno me (interesa|interesan) (recibir|seguir recibiendo)\b".to_owned(),
        format!(r"\bno me (interesan|interesa) (vuestros |vuestras |sus |los |las |tus )?({m})\b"),
        format!(r"\bno recibir (mas )?({m})\b"),
        r"^stop (this|it|these|them|now)$".to_owned(),
        r"\b(take|remove|delete|erase) (my number|my details|my data)\b".to_owned(),
        r"\b(unsubscribe|opt out)\b".to_owned(),
        r"\bquit (sending|messaging|texting)\b".to_owned(),
        format!(r"\benough (with the |of the |with |of )?({m})\b"),
        r"\b(me )?(descadastra|descadastre|descadastrem|descadastrar)\b".to_owned(),
        r"\b(tira|tirem|retira|retire|retirem|remove|removam|apaga|apaguem|exclua|excluam) (o )?meu (numero|contato|telefone)\b".to_owned(),
        r"\bnao quero (mais )?ser (contactado|contatado|contactada|contatada|incomodado|incomodada)\b".to_owned(),
        r"\bne plus (m |nous )?(envoyer|ecrire|contacter)\b".to_owned(),
        r"\b(supprimez|effacez) (mon numero|mes donnees)\b".to_owned(),
        format!(r"\bbasta (con )?({m})\b"),
        r"\b(cancellatemi|cancellami|toglietemi|toglimi) (dalla lista)?".to_owned(),
        r"\bmich abmelden\b".to_owned(),
        r"\b(entfernen|loschen) sie meine (nummer|daten)\b".to_owned(),
        r"\b(deixeu|deixa|deixin|pareu) (de|d) (enviar|escriure)\b".to_owned(),
        r"\b(esborreu|esborra) (el meu numero|les meves dades)\b".to_owned(),
        // «¿me podéis dar de baja?», but never «dar de baja la luz»: nothing else may follow
        format!(r"\bdar(me|nos)? de baja( de (los |las )?({m}|todo))?$"),
        format!(r"\b(parar|para|pare|stop) (los |las |the |as |os )?({m})\b"),
        r"\bno (me |nos )?(vuelvas|vuelvan|volvais|vuelva) a (escribir|escribirme|mandar|mandarme|enviar|enviarme|contactar|contactarme|molestar)\b".to_owned(),
        r"\bno (quiero|queremos|deseo) que me (sigan|sigais|sigas|siga) (enviando|mandando|escribiendo|contactando)\b".to_owned(),
        r"\bno (me |nos )?(sigais|sigas|sigan) (escribiendo|escribiendome|mandando|enviando|mandandome|enviandome)( (pisos|ofertas|cosas|nada|casas))?\b".to_owned(),
        r"\bno (hace falta|es necesario|necesito) (que )?(me |nos )?(sigais|sigas|sigan) (escribiendo|mandando|enviando)\b".to_owned(),
        r"\bno need to keep (sending|messaging|texting)\b".to_owned(),
        // «parad ya, hombre»: the imperative alone, first
        r"^parad (ya|hombre|de una vez)\b|^parad$".to_owned(),
        r"\bno cal que (m |em )?(envieu|envieu me|escriviu)\b".to_owned(),
        r"\bno me (interesa|interesan) (que|q) me (aviseis|avisen|avises|mandeis|manden|envieis|envien|escribais|escriban)\b".to_owned(),
        r"\bno (quiero|queremos) (que|q) me (llegue|lleguen) (nada|mas)\b".to_owned(),
        r"\b(apagad|apaga|apagar|apaguen) (las |los )?(notificaciones|avisos|alertas|mensajes)\b".to_owned(),
        r"\bno (quiero|queremos|deseo) seguir recibiendo\b".to_owned(),
        r"\bremove me\b".to_owned(),
        r"\b(don t|dont|do not) (text|message|contact)( me| us)?$".to_owned(),
        r"\bparar de receber\b".to_owned(),
        // ca
        format!(r"\bno (m |em |ens )?(envieu|mandeu|envies|envii|enviin|escriviu|escriguis|escriguin) (mes|cap)\b( ({m}))?"),
        r"\b(deixeu|deixa|deixin|pareu|para) de (enviar|escriure|enviar me|escriure me|enviarme|escriureme)\b".to_owned(),
        format!(r"\bno vull (rebre )?(mes )?(cap )?({m})\b"),
        r"\bno vull rebre (res|mes)\b".to_owned(),
        r"\b(doneu me|dona me|doneume|donam) de baixa\b".to_owned(),
        format!(r"\bprou ({m})\b"),
        // fr
        r"\b(arretez|arrete|cessez|arreter) de (m |nous )?(envoyer|ecrire|contacter)\b".to_owned(),
        format!(r"\bne (m |nous )?(envoyez|envoie|ecrivez) plus\b( (de |des )?({m}))?"),
        format!(r"\b(je|nous) ne (veux|voulons) plus (recevoir )?(de |vos |ces |des )?({m})\b"),
        r"\b(desabonnez moi|desinscrivez moi|desabonner moi)\b".to_owned(),
        // it
        format!(r"\bnon (mandatemi|mandarmi|inviatemi|inviarmi|scrivetemi|scrivermi|mi mandate|mi inviate|mi scrivete) (piu|mai piu)\b( ({m}))?"),
        r"\b(smettete|smetti|smettetela) di (mandarmi|inviarmi|scrivermi|mandare|inviare|scrivere)\b".to_owned(),
        format!(r"\bnon voglio (piu )?(ricevere )?(piu )?({m})\b"),
        // de
        format!(r"\b(schicken|senden) sie mir keine ({m}) mehr\b"),
        format!(r"\b(schick|sende) mir keine ({m}) mehr\b"),
        format!(r"\bkeine ({m}) mehr\b"),
        r"\b(horen sie auf|hor auf) mir zu (schreiben|schicken)\b".to_owned(),
        format!(r"\bich (mochte|will) keine ({m}) mehr\b"),
        r"\bnicht mehr (schreiben|kontaktieren|anschreiben|anrufen)\b".to_owned(),
    ]
    .iter()
    .map(|p| Regex::new(p).expect("a valid pattern"))
    .collect()
});

/// Asking to be written to again.
pub(super) static RESUME: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    let m = MESSAGES;
    [
        format!(r"\bvolver a (apuntar|apuntarme|incluir|incluirme|meter|meterme|suscribir|suscribirme) (a|en) (las |los |la |vuestra |vuestras )?({m}|lista)\b"),
        r"\bdar(me|nos)? de alta (en |a )?(las |los )?alertas( de (pisos|casas|viviendas))?$".to_owned(),
        r"\badd me back\b".to_owned(),
        format!(r"\b(want|like) to (receive|get) (the |your |new )*({m}|listings|listing alerts|properties) again\b"),
        format!(r"\bsign me up (for|to) (the |your )?([a-z]+ ){{0,2}}({m})\b"),
        // es: «quiero volver a recibir los avisos», «podéis volver a mandarme mensajes»
        r"\b(volver|vuelvo|volved|vuelve|vuelvan) a (recibir|mandarme|enviarme|escribirme|mandar|enviar)\b".to_owned(),
        // «volved a avisarme de pisos nuevos»: what follows is what the notices are about
        r"\b(volver|vuelvo|volved|vuelve|vuelvan|vuelvais) a avisar(me|nos)( de .*)?$".to_owned(),
        format!(r"\b(mandadme|mandame|mandenme|enviadme|enviame|envienme) (otra vez|de nuevo) (los |las )?({m})\b"),
        format!(r"\b(mandadme|mandame|mandenme|enviadme|enviame|envienme) (los |las )?({m}) (otra vez|de nuevo)\b"),
        r"\bahora (quiero|queremos) (recibir|recibirlos|recibirlas)\b".to_owned(),
        r"\b(avisadme|avisame|avisenme|avisame) (otra vez|de nuevo)\b".to_owned(),
        format!(r"\b(suscribirme|apuntarme|apuntadme|apuntame|apuntenme) (a|en) (vuestras |vuestros |las |los |sus |tus |la |el )?({m}|lista)\b"),
        r"\b(quiero|queremos|kiero) (seguir recibiendo|que me sigais mandando|q me sigais mandando|que me sigan mandando|que me sigais enviando|que me sigan enviando)( (los |las )?(pisos|ofertas|casas))?\b".to_owned(),
        r"\b(torneu|torna|tornin) me a (enviar|escriure)\b".to_owned(),
        r"\bvolver a (incluir|apuntar|meter|anadir)(me)? (en )?(la |vuestra |tu |su )?lista\b".to_owned(),
        format!(r"\b(seguid|sigan|sigue|seguir) (mandandome|enviandome|escribiendome)( (cosas|los avisos|({m})))?$"),
        r"\b(apuntadme|apuntame|apuntenme|apuntarme) (otra vez|de nuevo)\b".to_owned(),
        r"\b(vuelvan|volved|vuelve|volver) a (mandarme|enviarme) (los |las )?(ofertas|pisos|casas|promociones)\b".to_owned(),
        format!(r"\b(quiero|quisiera|queremos) (recibir|que me (mandeis|envieis|escribais)) (de nuevo|otra vez)( (los |las )?({m}))?"),
        format!(r"\b(quiero|quisiera|queremos) (recibir )?(de nuevo|otra vez) (los |las |vuestros |vuestras )?({m})\b"),
        format!(r"\b(activad|activa|activar|activen|reactivad|reactiva|reactivar|reactiven|reanudad|reanuda|reanudar|reanuden) (de nuevo |otra vez )?(los |las |mis |vuestros )?({m})\b"),
        format!(r"\b(activad|activa|activar) (los |las |mis |vuestros )?({m}) (de nuevo|otra vez)\b"),
        format!(r"\b(quiero|quisiera|queremos) seguir recibiendo\b( (los |las )?({m}))?"),
        r"\b(podeis|puedes|pueden|ya podeis|ya puedes) (volver a )?(escribirme|mandarme mensajes|enviarme mensajes) (otra vez|de nuevo)\b".to_owned(),
        r"\b(you can|u can|can|feel free to) (message|text|write to|contact) me again\b".to_owned(),
        r"\b(start again|resume messages|resume the messages|start the messages again)\b".to_owned(),
        r"\b(darme|dadme|dame|denme|quiero darme|me doy) de alta (de nuevo|otra vez)\b".to_owned(),
        // en
        format!(r"\b(start|resume|restart) (sending|messaging|texting)( me| us)?( ({m}))?( again)?\b"),
        format!(r"\bsend (me |us )?(the |your )?({m}) again\b"),
        format!(r"\b(want|like) to (receive|get) (the |your )?({m}) again\b"),
        format!(r"\b(turn|switch) (the |your |my )?({m}) back on\b"),
        r"\b(opt me back in|opt back in|opt me in|subscribe me again|resubscribe|re subscribe)\b".to_owned(),
        format!(r"\b(start|resume) (the |your |my )?({m})( again)?\b"),
        // pt
        r"\b(voltar|volte|voltem|volta) a (receber|me mandar|me enviar|mandar|enviar)\b".to_owned(),
        format!(r"\bquero receber (de novo|novamente|outra vez)( (as |os )?({m}))?"),
        format!(r"\bquero receber (as |os )?({m}) (de novo|novamente|outra vez)\b"),
        format!(r"\b(reativar|reative|reativem|ativar de novo) (as |os )?({m})\b"),
        r"\b(podem|pode) (me )?(mandar|enviar) (de novo|novamente|outra vez)\b".to_owned(),
        r"\b(volver|vuelvo|volved|vuelve) a (recibirlos|recibirlas|recibirlo)\b".to_owned(),
        // «¿puedo darme de alta como propietario?» is something else: nothing may follow
        r"\b(volver a )?(darme|dadme|dame|denme) de alta( de nuevo| otra vez)?$".to_owned(),
        r"\b(me|nos) (dais|das|dan|da|podeis dar|puedes dar|pueden dar|volveis a dar) de alta( de nuevo| otra vez)?$".to_owned(),
        r"\b(subscribe me|sign me back up|sign me up again)\b".to_owned(),
        format!(r"\bwant (the |my |your )?({m}) back\b"),
        format!(r"\b(quero )?(as |os )?({m}) de volta\b"),
        r"\b(me )?(cadastra|cadastre|recadastra|recadastre|cadastrem) (de novo|novamente|outra vez)\b".to_owned(),
        format!(r"\b(reactivez|reactiver|reactive) (les |vos )?({m})\b"),
        r"\b(voglio|vorrei) (di nuovo|ancora) ricevere\b".to_owned(),
        format!(r"\b({m}) wieder (erhalten|bekommen|empfangen)\b"),
        format!(r"\bdar(me|nos)? de alta( (de nuevo|otra vez))?( (a|en) (los |las )?({m}))?$"),
        format!(r"\b(quiero|quisiera|queremos) (recibir )?(los |las |vuestros |vuestras )?({m}) (de nuevo|otra vez)\b"),
        r"\b(turn|switch) (them|it) back on\b".to_owned(),
        r"\bsend (them|it|me them|them to me) again\b".to_owned(),
        // «¿podéis mandarme otra vez los avisos?»
        format!(r"\b(podeis|puedes|podrias|podriais|pueden|podrian) (mandarme|enviarme|mandarnos|enviarnos) (otra vez|de nuevo) (los |las )?({m})\b"),
        format!(r"\b(podeis|puedes|podrias|podriais|pueden|podrian) (mandarme|enviarme) (los |las )?({m}) (otra vez|de nuevo)\b"),
        // ca
        r"\b(torneu|torna|tornin) a (enviar|escriure|enviar me|enviarme)\b".to_owned(),
        format!(r"\bvull tornar a rebre\b( (els |les )?({m}))?"),
        // fr
        format!(r"\b(je veux|je voudrais|nous voulons) (recevoir )?(a nouveau|de nouveau) (vos |les |des )?({m})\b"),
        format!(r"\b(je veux|je voudrais) recevoir (vos |les )?({m}) (a nouveau|de nouveau)\b"),
        r"\b(renvoyez moi|reabonnez moi)\b".to_owned(),
        r"\b(je veux|je voudrais|nous voulons) (a nouveau|de nouveau) recevoir\b".to_owned(),
        r"\b(recommencez|recommencer|recommence) a (m |nous )?(envoyer|ecrire)\b".to_owned(),
        // it
        format!(r"\bvoglio (ricevere )?(di nuovo|ancora) (i |le |vostri |vostre |i vostri |le vostre )*({m})\b"),
        r"\b(ricominciate|riprendete) a (mandarmi|inviarmi|scrivermi)\b".to_owned(),
        format!(r"\b(riattivate|riattiva|riattivare) (gli |i |le )?({m})\b"),
        // de
        format!(r"\bich (mochte|will) wieder ({m})\b"),
        format!(r"\b(schicken sie mir|senden sie mir) wieder ({m})\b"),
        r"\bwieder anmelden\b".to_owned(),
    ]
    .iter()
    .map(|p| Regex::new(p).expect("a valid pattern"))
    .collect()
});

/// Asking whether one could, not asking to: «¿puedo dejar de recibir avisos si quiero?».
pub(super) const HYPOTHETICAL: &[&str] = &[
    "si quiero$",
    "si quisiera$",
    "whenever i want",
    "if i want",
    "just asking",
    "just curious",
    "curiosidad",
    "por curiosidad",
    "option",
    "opcion",
    "opcao",
    "se quiser",
];

/// Undoing a mistake: «didn't mean to unsubscribe», «me di de baja sin querer».
pub(super) const MISTAKES: &[&str] = &[
    "didn t mean to",
    "didnt mean to",
    "did not mean to",
    "by mistake",
    "sin querer",
    "por error",
    "me equivoque",
    "sem querer",
    "por engano",
];

/// A yes to the bot's question.
pub(super) const YES: &[&str] = &[
    "si", "sip", "yes", "yep", "yeah", "sim", "claro", "vale", "oui", "ja", "dale", "venga",
    "sure", "ok", "okay", "porfa", "perfecto", "genial", "of",
];

/// A no to it.
pub(super) const NO: &[&str] = &["no", "nop", "nope", "nao", "non", "nein", "nah"];

/// Verbs that are the messages: to write, send or contact someone.
pub(super) const MESSAGE_CUES: &[&str] = &[
    "escribir",
    "escribirme",
    "escribais",
    "escriban",
    "escribas",
    "mandar",
    "mandarme",
    "mandeis",
    "manden",
    "mandes",
    "enviar",
    "enviarme",
    "envieis",
    "envien",
    "envies",
    "contactar",
    "contactarme",
    "recibir",
    "recibirlos",
    "recibirlas",
    "recibiendo",
    "send",
    "sending",
    "message",
    "messaging",
    "texting",
    "contact",
    "contacting",
    "receive",
    "receiving",
    "mandar",
    "enviar",
    "escrever",
    "receber",
    "recebendo",
    "mandando",
    "enviando",
    "envoyer",
    "recevoir",
    "rebre",
    "enviar",
    "mandarmi",
    "inviarmi",
    "scrivermi",
    "ricevere",
    "schicken",
    "senden",
    "erhalten",
    "bekommen",
];

/// Words of stopping, alone or in a phrase.
pub(super) const STOP_CUES: &[&str] = &[
    "no mas",
    "nunca mas",
    "ya no",
    "no quiero",
    "no queremos",
    "dejad de",
    "deja de",
    "dejen de",
    "dejar de",
    "basta",
    "stop",
    "parar",
    "parad",
    "paren",
    "no longer",
    "no more",
    "don t",
    "dont",
    "do not",
    "quit",
    "nao quero",
    "chega",
    "pare",
    "parem",
    "nao mais",
    "mais nao",
    "plus",
    "arretez",
    "keine",
    "nicht mehr",
    "non piu",
    "smettete",
    "prou",
    "no vull",
    "deixeu",
];

/// Words of coming back.
pub(super) const RESUME_CUES: &[&str] = &[
    "otra vez",
    "de nuevo",
    "volver a",
    "volved a",
    "again",
    "back",
    "de novo",
    "novamente",
    "voltar a",
    "outra vez",
    "a nouveau",
    "de nouveau",
    "wieder",
    "di nuovo",
    "tornar a",
    "torneu a",
    "reactivar",
    "reactivad",
    "reativar",
    "resume",
    "reanudar",
];

/// A preference of one channel over another («mejor por WhatsApp», «lieber WhatsApp») is
/// not a wish to hear nothing.
pub(super) const PREFERENCES: &[&str] = &[
    "mejor",
    "prefiero",
    "preferiria",
    "better",
    "rather",
    "prefer",
    "melhor",
    "prefiro",
    "lieber",
    "plutot",
    "meglio",
];

/// A question is asked, not an instruction given: «¿cómo dejo de recibir…?», «why don't…».
pub(super) const QUESTION_WORDS: &[&str] = &[
    "como", "cuando", "donde", "porque", "por que", "how", "why", "when", "where", "what",
    "quando", "onde", "comment", "pourquoi", "come", "perche", "wie", "warum",
];

/// Words between a verb and its object that name nothing.
pub(super) const ARTICLES: &[&str] = &[
    "el", "la", "los", "las", "lo", "un", "una", "mas", "ese", "esa", "esos", "esas", "este",
    "esta", "the", "a", "an", "any", "more", "that", "those", "o", "os", "as", "mais", "esse",
    "essa", "de", "del", "do", "da", "l", "d", "les", "els", "le", "il", "lo", "mi", "mis", "tu",
    "tus", "su", "sus", "nuestro", "nuestra", "vuestro", "vuestra", "my", "your", "our", "meu",
    "minha", "meus", "minhas", "seu", "sua", "meva", "mon", "ma", "mio", "mia", "mein", "meine",
    "al", "mismo", "misma", "mismos", "mismas",
];

/// Beginnings of the words of a bot message that speaks of consent itself (receiving its
/// messages, a subscription): a keyword it names is an instruction to opt out or in, not a
/// choice of something else.
pub(super) const CONSENT_TALK: &[&str] = &[
    "recib",
    "receb",
    "receiv",
    "suscri",
    "subscri",
    "desuscri",
    "unsubscri",
    "avisos",
    "mensaj",
    "messag",
    "mensag",
    "notific",
    "envia",
    "enviar",
    "enviaremos",
    "escribir",
    "escribiremos",
    "update",
    "novedad",
    "novidad",
    "ricev",
];

/// Phrases of a bot message that speak of its messages: «Want me to let you know…».
pub(super) const CONSENT_TALK_PHRASES: &[&str] = &["keep getting", "keep you posted"];
